"""``POST /v1/ingest/{jobId}/cancel`` against a real ``telha serve`` on both engines, with a
real remote worker over gRPC (the scripted worker) and, in a second server, an in-process
worker pool: a pending job, a leased one (the worker gets the ``cancel`` message, its
heartbeat and submission are refused, nothing is written), a streaming one (its partial rows
are never visible, the previous version stays current), 409 ``JOB_FINISHED``, twice, children,
the same bytes posted again, other scopes, bad input."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from grpclib import GRPCError, Status

from telha.domain.model import Scope
from telha_proto.telha.worker.v1 import JobPayload, PollJobsRequest
from tests.integration.test_streaming import part
from tests.support.inproc import Server
from tests.support.queue_env import Tenant, queue_server, text_submission, transitions
from tests.support.server import ServerProcess, telha_check, write_config
from tests.support.wait import wait_job
from tests.support.worker import ScriptedWorker
from workers_common import IngestionResultBuilder

pytestmark = pytest.mark.anyio

#: Far longer than any test: a refused worker was refused by the cancel, not by expiry.
LEASE_S = 300.0


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[Server]:
    with queue_server(
        tmp_path_factory, f"cancel-{engine}", LEASE_S, engine, in_process=True
    ) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _cancel(tenant: Tenant, job_id: object, query: str = "") -> httpx.Response:
    return await tenant.client.post(f"/v1/ingest/{job_id}/cancel{query}")


async def test_cancel_a_pending_job(tenant: Tenant) -> None:
    """Cancelled at once; the answer is what GET answers; twice: the same; the same bytes
    posted again make a new job."""
    posted = await tenant.post("code", "oops.py", "x = 1")
    resp = await _cancel(tenant, posted["jobId"])
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body == await tenant.job(posted["jobId"])
    assert body["state"] == "cancelled" and body["attempts"] == 0
    assert transitions(body) == ["enqueued", "cancelled"]
    assert body["events"][-1]["detail"] == "cancelled by request"
    again = await _cancel(tenant, posted["jobId"])
    assert again.status_code == 200 and again.json() == body
    repost = await tenant.post("code", "oops.py", "x = 1")
    assert repost.get("deduplicated") is False and repost["jobId"] != posted["jobId"]
    assert (await tenant.job(repost["jobId"]))["state"] == "pending"


async def test_cancel_a_leased_job_tells_its_worker_and_fences_it(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("code", "busy.py", "y = 2")
    job = await worker.next_job(["code"])
    started = time.monotonic()
    resp = await _cancel(tenant, job.job_id)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["state"] == "cancelled" and body["attempts"] == 0
    assert transitions(body) == ["enqueued", "leased", "cancelled"]
    assert "generation 1" in body["events"][-1]["detail"]
    cancel = await worker.cancel_message(job)
    elapsed = time.monotonic() - started
    assert (cancel.job_id, cancel.lease_generation) == (job.job_id, job.lease_generation)
    assert cancel.reason == "cancelled by request" and elapsed < 5.0
    refused = (
        lambda: worker.heartbeat(job),
        lambda: worker.submit(job, text_submission("y = 2")),
        lambda: worker.fail(job, "transient: late"),
    )
    for call in refused:
        with pytest.raises(GRPCError) as err:
            await call()
        assert err.value.status is Status.FAILED_PRECONDITION
    source = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()
    assert (source["versions"], source["state"]) == ([], "pending")  # nothing was written
    assert (source["lastJobId"], source["lastJobState"]) == (job.job_id, "cancelled")
    after = await tenant.job(job.job_id)
    assert after["state"] == "cancelled" and transitions(after) == transitions(body)
    # Its slot is free and no job went back to the queue: the next POST is leased at once.
    nxt = await tenant.post("code", "next.py", "z = 3")
    assert (await worker.next_job(["code"])).job_id == nxt["jobId"]


async def test_a_stream_waiting_for_more_jobs_sends_the_cancel_at_once(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    """A stream with a free slot is parked waiting for a job when one it holds is
    cancelled: the ``cancel`` message comes at once (not at the poll's 5 s safety net), and
    the stream then goes on leasing."""
    first = await tenant.post("code", "wide1.py", "w = 1")
    request = PollJobsRequest(worker_id="wide", formats=["code"], capacity=2)
    send, receive = anyio.create_memory_object_stream[JobPayload](4)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                with send:
                    async for message in worker.stub.poll_jobs(request):
                        await send.send(message)

            tg.start_soon(read)
            with receive:
                assert (await receive.receive()).job_id == first["jobId"]
                await anyio.sleep(0.3)  # parked on its wake-up, one slot free
                started = time.monotonic()
                assert (await _cancel(tenant, first["jobId"])).status_code == 200
                cancel = (await receive.receive()).cancel
                waited = time.monotonic() - started
                second = await tenant.post("code", "wide2.py", "w = 2")
                then = await receive.receive()
            tg.cancel_scope.cancel()
    assert cancel is not None and cancel.job_id == first["jobId"] and waited < 2.0
    assert then.cancel is None and then.job_id == second["jobId"]


async def test_cancel_mid_stream_never_shows_the_partial_rows(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    """A source's first version is current; a second one streams two parts and is
    cancelled: the parts were never visible, the first version stays current and alone."""
    posted = await tenant.post("csv", "big.csv", "a\n1\n")
    first = await worker.next_job(["csv"])
    sub, _ = part(["first"], 0, 0, partial=False)
    assert (await worker.submit(first, sub)).accepted
    source = posted["sourceId"]
    v1 = (await tenant.client.get(f"/v1/sources/{source}")).json()["versions"]
    assert len(v1) == 1
    await tenant.post("csv", "big.csv", "a\n2\n")
    job = await worker.next_job(["csv"])
    base = 0
    for seq in range(2):
        sub, base = part([f"partial {seq}-{i}" for i in range(3)], base, seq)
        assert (await worker.submit(job, sub)).accepted
    rows = f"/v1/nodes?label=ROW&sourceId={source}"
    assert len((await tenant.client.get(rows)).json()["nodes"]) == 1  # not visible yet
    resp = await _cancel(tenant, job.job_id)
    assert resp.status_code == 200, resp.text
    assert transitions(resp.json())[-2:] == ["stream_abandoned", "cancelled"]
    await worker.cancel_message(job)
    final, _ = part(["last"], base, 2, partial=False)
    with pytest.raises(GRPCError) as err:
        await worker.submit(job, final)
    assert err.value.status is Status.FAILED_PRECONDITION
    nodes = (await tenant.client.get(rows)).json()["nodes"]
    assert [n["properties"]["seq"] for n in nodes] == [0] and len(nodes) == 1
    assert (await tenant.client.get(f"/v1/sources/{source}")).json()["versions"] == v1
    # Read as of now + the past: the partial rows were visible at no time.
    for version in v1:
        past = await tenant.client.get(f"{rows}&asOf={version['publishedTx']}")
        assert len(past.json()["nodes"]) == 1
    # telha check takes cancelled jobs and the abandoned version as they are.
    checked = await anyio.to_thread.run_sync(telha_check, tenant.server.config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "job_states" in checked.stdout and "orphan_versions" in checked.stdout


async def test_finished_jobs_answer_409_job_finished(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    await tenant.post("code", "done.py", "a = 1")
    done = await worker.next_job(["code"])
    assert (await worker.submit(done, text_submission("a = 1"))).accepted
    await tenant.post("code", "dead.py", "b = 2")
    dead = await worker.next_job(["code"])
    assert (await worker.fail(dead, "corrupt_input: no", permanent=True)).accepted
    assert (await tenant.job(dead.job_id))["state"] == "dead"
    for job_id, state in ((done.job_id, "completed"), (dead.job_id, "dead")):
        resp = await _cancel(tenant, job_id)
        assert resp.status_code == 409, resp.text
        error = resp.json()["error"]
        assert error["code"] == "JOB_FINISHED" and state in error["message"]
        assert (await tenant.job(job_id))["state"] == state  # untouched
    resp = await _cancel(tenant, dead.job_id, "?children=true")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "JOB_FINISHED"


async def test_children_true_cancels_the_unfinished_children(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    """An e-mail-like parent completes with three child jobs; one child is being worked on:
    ``children=true`` cancels the pending ones and revokes the leased one (its worker is
    told); the parent stays completed."""
    await tenant.post("code", "mail.py", "parent")
    parent = await worker.next_job(["code"])
    b = IngestionResultBuilder()
    b.add_node(["DOC"], {}, spans=[b.add_span_text("parent\n", kind="body")])
    names = [f"mail.py/att{i}.py" for i in range(3)]
    for i, name in enumerate(names):
        b.add_child_job("code", name, content=f"att = {i}".encode())
    assert (await worker.submit(parent, b.build())).accepted
    busy = await worker.next_job(["code"])
    # The children's ids, as a client learns them: the same bytes posted again answer with
    # the active job that covers them.
    children = []
    for i, name in enumerate(names):
        dup = await tenant.post("code", name, f"att = {i}")
        assert dup["deduplicated"] is True
        children.append(str(dup["jobId"]))
    assert busy.job_id in children
    resp = await _cancel(tenant, parent.job_id)
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "JOB_FINISHED"
    resp = await _cancel(tenant, parent.job_id, "?children=true")
    assert resp.status_code == 200, resp.text
    assert resp.json()["state"] == "completed" and resp.json() == await tenant.job(parent.job_id)
    await worker.cancel_message(busy)
    with pytest.raises(GRPCError) as err:
        await worker.submit(busy, text_submission("att = 0"))
    assert err.value.status is Status.FAILED_PRECONDITION
    for child in children:
        job = await tenant.job(child)
        assert job["state"] == "cancelled", job
        assert job["events"][-1]["detail"].startswith(f"parent {parent.job_id} cancelled")  # type: ignore[index]
    with pytest.raises(TimeoutError):  # nothing is left for a worker
        await worker.next_job(["code"], within_s=0.5)
    # Now the same bytes make a new job.
    again = await tenant.post("code", names[0], "att = 0")
    assert again.get("deduplicated") is False and again["jobId"] not in children


async def test_other_scopes_unknown_jobs_and_bad_input(tenant: Tenant, queue_srv: Server) -> None:
    posted = await tenant.post("code", "mine.py", "m = 1")
    other = queue_srv.create_key(f"other-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=queue_srv.base_url, headers={"x-api-key": other}, timeout=30
    ) as c:
        resp = await c.post(f"/v1/ingest/{posted['jobId']}/cancel")
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "NOT_FOUND"
    assert (await tenant.job(posted["jobId"]))["state"] == "pending"  # untouched
    resp = await _cancel(tenant, uuid.uuid4())
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "NOT_FOUND"
    resp = await _cancel(tenant, posted["jobId"], "?children=yes")
    assert resp.status_code == 400 and "children" in resp.json()["error"]["message"]
    resp = await _cancel(tenant, "not-a-uuid")
    assert resp.status_code in (400, 404) and "error" in resp.json()
    resp = await tenant.client.post(
        f"/v1/ingest/{posted['jobId']}/cancel", headers={"x-api-key": "nope"}
    )
    assert resp.status_code == 401
    assert (await tenant.job(posted["jobId"]))["state"] == "pending"


def test_in_process_pool_abandons_a_cancelled_job(tmp_path: Path, engine: str) -> None:
    """An in-process consumer (concurrency 1) working on a job that takes a minute: the
    cancel reaches it through its poll stream, so it takes the next job at once."""
    config = write_config(
        tmp_path,
        engine,
        workers={"in_process": ["tests.support.slow_worker"], "concurrency": 1, "processes": 0},
    )
    key_scope = Scope("pool", "org")
    with ServerProcess(config) as srv:
        key = srv.create_key(key_scope.tenant_id, key_scope.organization_id)
        anyio.run(_pool_case, srv.base_url, key)
        assert srv.stop() == 0, srv.log_text()


async def _pool_case(base_url: str, key: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers={"x-api-key": key}, timeout=30) as c:
        first = (await c.post("/v1/ingest", json=_code("slow1.py"))).json()["jobId"]
        await wait_job(c, first, "leased", within_s=30)
        second = (await c.post("/v1/ingest", json=_code("slow2.py"))).json()["jobId"]
        started = time.monotonic()
        resp = await c.post(f"/v1/ingest/{first}/cancel")
        assert resp.status_code == 200 and resp.json()["state"] == "cancelled"
        await wait_job(c, second, "leased", within_s=10)
        assert time.monotonic() - started < 10  # not the 60 s the first job would take
        assert (await c.get(f"/v1/ingest/{first}")).json()["state"] == "cancelled"


def _code(name: str) -> dict[str, str]:
    return {"format": "code", "name": name, "content": f"# {name}"}


async def test_a_remote_worker_process_stops_the_cancelled_job(tenant: Tenant) -> None:
    """A real ``workers_common.run`` process (capacity 1) holding a job it would work on
    for a minute: the cancel message makes it drop the job, and it leases the next at once."""
    proc = tenant.server.spawn_worker("tests.support.slow_worker", tenant.scope, SLOW_WORKER_S="60")
    try:
        first = await tenant.post("code", "remote1.py", "r = 1")
        await wait_job(tenant.client, first["jobId"], "leased", within_s=30)
        second = await tenant.post("code", "remote2.py", "r = 2")
        started = time.monotonic()
        assert (await _cancel(tenant, first["jobId"])).status_code == 200
        leased = await wait_job(tenant.client, second["jobId"], "leased", within_s=15)
        assert time.monotonic() - started < 15 and leased["state"] == "leased"
        assert proc.poll() is None  # the worker goes on
    finally:
        proc.kill()
        proc.wait()
    assert (await tenant.job(first["jobId"]))["state"] == "cancelled"
