"""The job queue and WorkerService against a real server over gRPC on 127.0.0.1: leases,
heartbeats, retries, dead letters, auth, apply."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from grpclib import GRPCError, Status

from telha.domain.model import Scope
from telha_proto.telha.worker.v1 import JobPayload, PollJobsRequest
from tests.support.inproc import InProcessServer, Server
from tests.support.queue_env import Tenant, queue_server, text_submission, transitions
from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_job, wait_job_blocking
from tests.support.worker import ScriptedWorker, scripted_worker

pytestmark = pytest.mark.anyio

LEASE_S = 1.0


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[Server]:
    with queue_server(
        tmp_path_factory, f"queue-{engine}", LEASE_S, engine, in_process=True, max_attempts=3
    ) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def test_enqueue_lease_submit_complete(tenant: Tenant, worker: ScriptedWorker) -> None:
    posted = await tenant.post("text", "a.txt", "hello")
    assert (
        posted["deduplicated"] is False and posted["statusUrl"] == f"/v1/ingest/{posted['jobId']}"
    )
    assert (await tenant.job(posted["jobId"]))["state"] == "pending"
    again = await tenant.post("text", "a.txt", "hello")
    assert again == {"deduplicated": True, "sourceId": posted["sourceId"], "jobId": posted["jobId"]}

    job = await worker.next_job(["text"])
    assert job.job_id == posted["jobId"] and job.kind == "ingest:text" and job.attempts == 0
    assert job.tenant_id == tenant.scope.tenant_id and job.lease_generation == 1
    payload = json.loads(job.payload_json)
    assert base64.b64decode(payload["content_b64"]) == b"hello" and payload["format"] == "text"
    assert (await tenant.job(job.job_id))["state"] == "leased"

    resp = await worker.submit(job, text_submission("hello"))
    assert resp.accepted and len(resp.node_ids) == 1
    done = await tenant.job(job.job_id)
    assert done["state"] == "completed" and transitions(done) == ["enqueued", "leased", "completed"]
    assert done["attempts"] == 1  # attempts made, not failures
    node = (await tenant.client.get(f"/v1/nodes/{resp.node_ids[0]}")).json()
    assert node["provenance"]["spans"][0]["text"] == "hello"
    version = (await tenant.client.get(f"/v1/sources/{posted['sourceId']}")).json()["versions"][0]
    assert version["jobId"] == job.job_id and version["worker"] == "scripted"
    # Same bytes again: request-level dedup against the latest version now.
    assert (await tenant.post("text", "a.txt", "hello")) == {
        "deduplicated": True,
        "sourceId": posted["sourceId"],
    }
    # A late duplicate submission of a finished job is refused, writing nothing.
    with pytest.raises(GRPCError) as err:
        await worker.submit(job, text_submission("hello"))
    assert err.value.status is Status.FAILED_PRECONDITION


async def test_lease_expiry_release_and_stale_generation(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("text", "slow.txt", "slow")
    first = await worker.next_job(["text"])
    expired = await wait_job(tenant.client, posted["jobId"], "pending", within_s=LEASE_S + 5)
    assert expired["attempts"] == 1 and "lease_expired" in transitions(expired)
    second = await worker.next_job(["text"])
    assert second.job_id == first.job_id and second.lease_generation == first.lease_generation + 1
    assert second.attempts == 1
    with pytest.raises(GRPCError) as err:
        await worker.submit(first, text_submission("slow"))
    assert err.value.status is Status.FAILED_PRECONDITION
    with pytest.raises(GRPCError) as err:  # the old generation's heartbeat extends nothing
        await worker.heartbeat(first)
    assert err.value.status is Status.FAILED_PRECONDITION
    assert (await worker.submit(second, text_submission("slow"))).accepted


async def test_heartbeats_keep_a_long_job(tenant: Tenant, worker: ScriptedWorker) -> None:
    posted = await tenant.post("text", "long.txt", "long")
    job = await worker.next_job(["text"])
    for _ in range(int(3 * LEASE_S / 0.3)):  # three leases' worth of time
        hb = await worker.heartbeat(job)
        assert hb.extended_job_ids == [job.job_id] and hb.lease_deadline > 0
        await anyio.sleep(0.3)
    assert (await worker.submit(job, text_submission("long"))).accepted
    done = await tenant.job(posted["jobId"])
    assert done["state"] == "completed" and "lease_expired" not in transitions(done)


async def test_transient_retries_with_backoff_then_dead(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("text", "flaky.txt", "flaky")
    for attempt in range(3):
        job = await worker.next_job(["text"])
        assert job.attempts == attempt
        await worker.fail(job, f"transient: upstream busy ({attempt})")
    dead = await wait_job(tenant.client, posted["jobId"], "dead")
    assert dead["attempts"] == 3
    assert transitions(dead) == [
        "enqueued",
        "leased",
        "retried",
        "leased",
        "retried",
        "leased",
        "dead",
    ]
    assert dead["failureReason"] == "transient: upstream busy (2)"


@pytest.mark.parametrize("kind", ["corrupt_input", "unsupported_feature"])
async def test_permanent_kinds_dead_at_once(
    tenant: Tenant, worker: ScriptedWorker, kind: str
) -> None:
    posted = await tenant.post("text", f"{kind}.txt", kind)
    job = await worker.next_job(["text"])
    await worker.fail(job, f"{kind}: cannot read this " + "x" * 600, permanent=True)
    dead = await tenant.job(posted["jobId"])
    assert dead["state"] == "dead" and dead["attempts"] == 1
    reason = str(dead["failureReason"])
    assert reason.startswith(f"{kind}: cannot read") and len(reason.encode()) == 512


@pytest.mark.parametrize(
    "submission",
    [
        {"v": 1, "canonicalText": "abc", "spans": [{"start": 0, "end": 9, "kind": "body"}]},
        {"v": 1, "canonicalText": "é", "spans": [{"start": 0, "end": 1, "kind": "body"}]},
        {"v": 1, "canonicalText": "a\r\nb"},
        {"v": 1, "canonicalText": "x", "nodes": [{"labels": ["lower"]}]},
        {"v": 1, "canonicalText": "x", "nodes": [{"labels": ["A", "A"]}]},  # found by fuzzing
        {"v": 1, "canonicalText": "x", "nodes": [{"labels": ["A"], "spanRefs": [3]}]},
        {"v": 1, "canonicalText": "x", "nodes": [{"labels": ["A"], "id": "not-a-uuid"}]},
        {
            "v": 1,
            "nodes": [{"labels": ["A"]}],
            "relationships": [{"type": "R", "fromRef": 0, "toRef": 0, "toId": str(uuid.uuid4())}],
        },
        {"v": 1, "relationships": [{"type": "R", "fromRef": 5, "toId": str(uuid.uuid4())}]},
        {"v": 2},
        {"v": 1, "surprise": True},
        b"not json",
    ],
)
async def test_invalid_submission_dead_letters_and_writes_nothing(
    tenant: Tenant, worker: ScriptedWorker, submission: dict[str, object] | bytes
) -> None:
    posted = await tenant.post("text", "invalid.txt", "x")
    job = await worker.next_job(["text"])
    resp = await worker.submit(job, submission)
    assert resp.accepted is False
    dead = await tenant.job(posted["jobId"])
    assert dead["state"] == "dead" and str(dead["failureReason"]).startswith("invalid_submission: ")
    source = await tenant.client.get(f"/v1/sources/{posted['sourceId']}")
    assert source.status_code == 200 and source.json()["versions"] == []  # nothing written
    assert source.json()["lastJobState"] == "dead"
    assert (await tenant.client.get("/v1/nodes")).json()["nodes"] == []


async def test_auth_failures(queue_srv: Server, tenant: Tenant) -> None:
    expired = queue_srv.worker_token(tenant.scope, ttl_s=-10)
    forged = tenant.token[:-4] + ("AAAA" if not tenant.token.endswith("AAAA") else "BBBB")
    for token in (None, "garbage", forged, expired):
        async with scripted_worker(queue_srv.grpc_addr, token) as w:
            with pytest.raises(GRPCError) as err:
                await w.next_job(["text"], within_s=5)
            assert err.value.status is Status.UNAUTHENTICATED
            with pytest.raises(GRPCError) as err:
                await w.heartbeat()
            assert err.value.status is Status.UNAUTHENTICATED
            with pytest.raises(GRPCError) as err:
                await w.fail(
                    JobPayload(job_id=str(uuid.uuid4()), lease_generation=1), "transient: x"
                )
            assert err.value.status is Status.UNAUTHENTICATED


async def test_scoped_tokens_see_only_their_scope(queue_srv: Server, tenant: Tenant) -> None:
    posted = await tenant.post("eml", "mail.eml", "From: a@b\n\nhi")
    other = queue_srv.worker_token(Scope(f"other-{uuid.uuid4()}", "org"))
    async with scripted_worker(queue_srv.grpc_addr, other) as stranger:
        with pytest.raises(TimeoutError):
            await stranger.next_job(["eml"], within_s=0.5)
    async with scripted_worker(queue_srv.grpc_addr, queue_srv.worker_token(None), "fleet") as fleet:
        job = await fleet.next_job(["eml"])
        assert job.job_id == posted["jobId"] and job.tenant_id == tenant.scope.tenant_id
        async with scripted_worker(queue_srv.grpc_addr, other) as stranger:
            with pytest.raises(GRPCError) as err:
                await stranger.submit(job, text_submission("hi"))
            assert err.value.status is Status.FAILED_PRECONDITION
            with pytest.raises(GRPCError) as err:
                await stranger.heartbeat(job)
            assert err.value.status is Status.FAILED_PRECONDITION
        assert (await fleet.submit(job, text_submission("hi"))).accepted


async def test_unknown_format_listed_and_known_format_without_worker_stays_pending(
    tenant: Tenant,
) -> None:
    resp = await tenant.client.post(
        "/v1/ingest", json={"format": "rtf", "name": "a.rtf", "content": "x"}
    )
    assert resp.status_code == 400 and "pdf" in resp.json()["error"]["message"]
    posted = await tenant.post("pdf", "report.pdf", b"%PDF-1.4 not really")
    await anyio.sleep(0.3)
    assert (await tenant.job(posted["jobId"]))["state"] == "pending"
    assert (await tenant.client.get(f"/v1/ingest/{uuid.uuid4()}")).status_code == 404


async def test_web_needs_no_content(tenant: Tenant) -> None:
    resp = await tenant.client.post(
        "/v1/ingest", json={"format": "web", "name": "http://127.0.0.1:9/page"}
    )
    assert resp.status_code == 202
    again = await tenant.client.post(
        "/v1/ingest", json={"format": "web", "name": "http://127.0.0.1:9/page"}
    )
    assert (
        again.status_code == 202 and again.json()["jobId"] != resp.json()["jobId"]
    )  # fetch formats skip it


async def test_deterministic_id_upsert_ladder(tenant: Tenant, worker: ScriptedWorker) -> None:
    node_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"person:{tenant.scope.tenant_id}"))
    txs = []
    for i, (text, props) in enumerate([("v1", {"n": 1}), ("v2", {"n": 1}), ("v3", {"n": 2})]):
        await tenant.post("text", f"p{i}.txt", text)
        job = await worker.next_job(["text"])
        resp = await worker.submit(job, text_submission(text, id=node_id, properties=props))
        assert resp.accepted and resp.node_ids == [node_id]
        node = (await tenant.client.get(f"/v1/nodes/{node_id}")).json()
        txs.append(node["txTime"]["from"])
    assert txs[0] == txs[1] < txs[2]  # identical → no new version; changed → new version
    now = (await tenant.client.get(f"/v1/nodes/{node_id}")).json()
    assert now["properties"] == {"n": 2} and now["txTime"]["to"] is None
    old = (await tenant.client.get(f"/v1/nodes/{node_id}", params={"asOf": txs[0]})).json()
    assert old["properties"] == {"n": 1} and old["txTime"] == {"from": txs[0], "to": txs[2]}


async def test_dangling_edge_hidden_until_endpoint_arrives(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    parent = str(uuid.uuid5(uuid.NAMESPACE_URL, f"msg:{tenant.scope.tenant_id}"))
    reply = text_submission("reply")
    reply["relationships"] = [
        {"type": "IN_REPLY_TO", "fromRef": 0, "toId": parent, "properties": {}}
    ]
    await tenant.post("eml", "reply.eml", "reply")
    job = await worker.next_job(["eml"])
    [reply_id] = (await worker.submit(job, reply)).node_ids
    assert (await tenant.client.get(f"/v1/nodes/{reply_id}/edges")).json() == {"edges": []}
    await tenant.post("eml", "parent.eml", "parent")
    job = await worker.next_job(["eml"])
    await worker.submit(job, text_submission("parent", id=parent))
    [edge] = (await tenant.client.get(f"/v1/nodes/{reply_id}/edges")).json()["edges"]
    assert (edge["type"], edge["from"], edge["to"]) == ("IN_REPLY_TO", reply_id, parent)


async def test_child_jobs_enqueued_with_dedup(tenant: Tenant, worker: ScriptedWorker) -> None:
    await tenant.post("eml", "with-attachment.eml", "parent")
    job = await worker.next_job(["eml"])
    sub = text_submission("parent")
    attachment = base64.b64encode(b"attached text").decode()
    sub["childJobs"] = [
        {"format": "text", "name": "attachment:abc", "contentB64": attachment},
        {"format": "text", "name": "attachment:abc", "contentB64": attachment},
    ]
    assert (await worker.submit(job, sub)).accepted
    child = await worker.next_job(["text"])
    assert json.loads(child.payload_json)["name"] == "attachment:abc"
    events = (await tenant.job(child.job_id))["events"]
    assert events[0]["detail"] == f"parent={job.job_id}"  # type: ignore[index]
    with pytest.raises(TimeoutError):  # the second, identical child was deduplicated
        await worker.next_job(["text"], within_s=0.5)


async def test_capacity_bounds_unfinished_jobs_per_stream(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = [await tenant.post("code", f"f{i}.py", f"x = {i}") for i in range(3)]
    got: list[str] = []
    finished_first = False
    request = PollJobsRequest(worker_id="cap", formats=["code"], capacity=2)
    with anyio.move_on_after(LEASE_S * 0.6):  # well inside one lease: nothing expires
        async for job in worker.stub.poll_jobs(request):
            got.append(job.job_id)
            if len(got) == 2:
                await anyio.sleep(0.2)  # a third job is waiting, but both slots are taken
                states = sorted([str((await tenant.job(p["jobId"]))["state"]) for p in posted])
                assert states == ["leased", "leased", "pending"]
                assert (await worker.submit(job, text_submission("x"))).accepted
                finished_first = True
    # Two at once; the third only after one of them finished.
    assert finished_first and len(got) == 3 == len(set(got))


def test_remote_worker_process_end_to_end(tmp_path: Path, engine: str) -> None:
    """A real ``python -m workers_common.run text_worker`` process over gRPC."""
    import subprocess
    import sys

    with InProcessServer(write_config(tmp_path, engine, workers={"in_process": []})) as server:
        key = server.create_key("t", "o")
        env = server.worker_env(Scope("t", "o"))
        log = (tmp_path / "worker.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers_common.run", "text_worker"], env=env, stderr=log
        )
        try:
            with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
                posted = c.post(
                    "/v1/ingest",
                    json={"format": "markdown", "name": "r.md", "content": "# Hi\n\nThere."},
                ).json()
                state = wait_job_blocking(c, posted["jobId"], within_s=20)
                assert state["state"] == "completed", state
                nodes = c.get("/v1/nodes", params={"sourceId": posted["sourceId"]}).json()["nodes"]
                texts = {n["labels"][0]: n["provenance"]["spans"][0]["text"] for n in nodes}
                assert texts == {
                    "DOCUMENT": "# Hi\n\nThere.",
                    "SECTION": "# Hi",
                    "PARAGRAPH": "There.",
                }
                version = c.get(f"/v1/sources/{posted['sourceId']}").json()["versions"][0]
                assert version["worker"].endswith(str(proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()
        assert "polling" in (tmp_path / "worker.log").read_text()
        assert server.stop() == 0


async def test_restart_keeps_jobs_in_every_state(tmp_path: Path, engine: str) -> None:
    with ServerProcess(
        write_config(
            tmp_path,
            engine,
            workers={"in_process": []},
            jobs={"lease_secs": LEASE_S, "reap_interval_s": 0.1, "max_attempts": 3},
        )
    ) as server:
        scope = Scope("t", "o")
        key = server.create_key(scope.tenant_id, scope.organization_id)
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            t = Tenant(server, c, scope)
            ids = {
                name: (await t.post("csv", f"{name}.csv", name))["jobId"]
                for name in ("done", "dead", "held", "waiting")
            }
            async with scripted_worker(server.grpc_addr, t.token) as w:
                for name in ("done", "dead", "held"):
                    job = await w.next_job(["csv"])
                    assert job.job_id == ids[name]
                    if name == "done":
                        await w.submit(job, text_submission(name))
                    elif name == "dead":
                        await w.fail(job, "corrupt_input: nope", permanent=True)
                before = {name: (await t.job(j))["state"] for name, j in ids.items()}
                assert before == {
                    "done": "completed",
                    "dead": "dead",
                    "held": "leased",
                    "waiting": "pending",
                }
                # Core stops while the worker still holds "held": core closing the stream is
                # no worker loss, the lease stays (and outlives the restart).
                assert server.stop() == 0
        server.start()
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            t = Tenant(server, c, scope)
            after = {name: (await t.job(j))["state"] for name, j in ids.items()}
            assert (
                after["done"] == "completed"
                and after["dead"] == "dead"
                and after["waiting"] == "pending"
            )
            assert after["held"] in (
                "leased",
                "pending",
            )  # the lease outlives the restart, then expires
            held = await wait_job(t.client, ids["held"], "pending", within_s=LEASE_S + 5)
            assert "worker_lost" not in transitions(held) and "lease_expired" in transitions(held)
            async with scripted_worker(server.grpc_addr, t.token) as w:
                leased = {(await w.next_job(["csv"])).job_id for _ in range(2)}
                assert leased == {ids["held"], ids["waiting"]}
                with pytest.raises(TimeoutError):  # nothing lost, nothing duplicated
                    await w.next_job(["csv"], within_s=0.5)


async def test_worker_consumer_over_grpc(tenant: Tenant) -> None:
    """workers_common.WorkerConsumer against the real server: a generator handler's final
    submission, a typed failure, and an untyped exception (transient, retried)."""
    from workers_common import CorruptInput, IngestionResultBuilder, Job, WorkerConsumer
    from workers_common.transport import GrpcTransport

    calls: dict[str, int] = {}

    def handler(job: Job) -> object:
        calls[job.name] = calls.get(job.name, 0) + 1
        if job.name == "corrupt.tsv":
            raise CorruptInput("row 3 has 2 columns, expected 3")
        if job.name == "flaky.tsv" and job.attempts == 0:
            raise RuntimeError("disk hiccup")

        def stream() -> object:
            b = IngestionResultBuilder()
            span = b.add_span_text(job.content.decode(), kind="body")
            b.add_node(["TABLE"], {"name": job.name}, spans=[span])
            b.set_partial(False)
            yield b.build()

        return stream()

    transport = GrpcTransport(tenant.server.grpc_addr, tenant.token)
    consumer = WorkerConsumer(transport, handler, ["tsv"], worker_id="consumer-test", capacity=2)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(consumer.run)
            ok = await tenant.post("tsv", "ok.tsv", "a\tb")
            bad = await tenant.post("tsv", "corrupt.tsv", "a\tb\nc")
            flaky = await tenant.post("tsv", "flaky.tsv", "x\ty")
            assert (await wait_job(tenant.client, ok["jobId"], "completed"))["attempts"] == 1
            dead = await wait_job(tenant.client, bad["jobId"], "dead")
            assert dead["failureReason"] == "corrupt_input: row 3 has 2 columns, expected 3"
            retried = await wait_job(tenant.client, flaky["jobId"], "completed")
            assert retried["attempts"] == 2 and "retried" in transitions(retried)
            assert str(retried["events"][2]["detail"]).startswith(
                "transient: RuntimeError: disk hiccup"
            )  # type: ignore[index]
            tg.cancel_scope.cancel()
    finally:
        transport.close()
    assert calls == {"ok.tsv": 1, "corrupt.tsv": 1, "flaky.tsv": 2}
    nodes = (await tenant.client.get("/v1/nodes", params={"label": "TABLE"})).json()["nodes"]
    assert sorted(n["properties"]["name"] for n in nodes) == ["flaky.tsv", "ok.tsv"]


async def test_a_waiting_poller_is_woken_at_once(tenant: Tenant, worker: ScriptedWorker) -> None:
    """A new job reaches a waiting PollJobs stream by wake-up, well before the 5 s idle re-check."""
    got: list[JobPayload] = []

    async def poll() -> None:
        got.append(await worker.next_job(["xlsx"], within_s=3))

    async with anyio.create_task_group() as tg:
        tg.start_soon(poll)
        await anyio.sleep(0.3)  # the poller is waiting on an empty queue
        posted = await tenant.post("xlsx", "w.xlsx", b"PK")
    assert got[0].job_id == posted["jobId"]


async def test_content_hash_is_not_rewritten_for_raw_formats(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    posted = await tenant.post("text", "hash.txt", "abc")
    job = await worker.next_job(["text"])
    sub = text_submission("abc")
    sub["contentHash"] = "0" * 64
    assert (await worker.submit(job, sub)).accepted is False
    dead = await tenant.job(posted["jobId"])
    assert dead["state"] == "dead" and "contentHash" in str(dead["failureReason"])


async def test_invalid_child_jobs_write_nothing(tenant: Tenant, worker: ScriptedWorker) -> None:
    posted = await tenant.post("text", "parent.txt", "p")
    job = await worker.next_job(["text"])
    sub = text_submission("p")
    sub["childJobs"] = [{"format": "text", "name": "c.txt", "contentB64": "!!not base64"}]
    assert (await worker.submit(job, sub)).accepted is False
    assert (await tenant.job(posted["jobId"]))["state"] == "dead"
    assert (await tenant.client.get("/v1/nodes")).json()["nodes"] == []
    with pytest.raises(TimeoutError):
        await worker.next_job(["text"], within_s=0.5)


async def test_upsert_sees_valid_time_and_ignores_key_order(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    node_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"vt:{tenant.scope.tenant_id}"))
    shapes = [
        {"properties": {"a": 1, "b": 2}},
        {"properties": {"b": 2, "a": 1}},  # same properties, other order: identical
        {"properties": {"a": 1, "b": 2}, "validTime": {"from": 1_000_000, "to": None}},
    ]
    txs = []
    for i, shape in enumerate(shapes):
        await tenant.post("text", f"vt{i}.txt", f"vt{i}")
        job = await worker.next_job(["text"])
        assert (await worker.submit(job, text_submission(f"vt{i}", id=node_id, **shape))).accepted
        node = (await tenant.client.get(f"/v1/nodes/{node_id}")).json()
        txs.append(node["txTime"]["from"])
    assert txs[0] == txs[1] < txs[2]
    assert node["validTime"] == {"from": 1_000_000, "to": None}
    bad = text_submission("x", validTime={"from": 2**63})
    await tenant.post("text", "vtbad.txt", "x")
    job = await worker.next_job(["text"])
    assert (await worker.submit(job, bad)).accepted is False


def test_remote_worker_finishes_its_job_across_a_core_restart(tmp_path: Path, engine: str) -> None:
    """The poll stream breaks when core restarts; the job in hand still finishes and its
    submission reaches the restarted core: one attempt, no expired lease."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        grpc_addr = f"127.0.0.1:{s.getsockname()[1]}"
    with ServerProcess(
        write_config(tmp_path, engine, server={"grpc_addr": grpc_addr}, workers={"in_process": []})
    ) as server:
        key = server.create_key("t", "o")
        env = {
            **server.worker_env(Scope("t", "o"), SLOW_WORKER_S="3"),
            "TELHA_GRPC_TARGET": grpc_addr,
        }
        log = (tmp_path / "worker.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers_common.run", "tests.support.slow_worker"],
            env=env,
            stderr=log,
        )
        try:
            with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
                job_id = c.post(
                    "/v1/ingest", json={"format": "code", "name": "a.py", "content": "x = 1"}
                ).json()["jobId"]
                assert wait_job_blocking(c, job_id, "leased", within_s=20)["state"] == "leased"
            assert server.stop() == 0  # mid-job
            server.start()
            with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
                job = wait_job_blocking(c, job_id, within_s=40)
            assert job["state"] == "completed" and job["attempts"] == 1, job
            assert "lease_expired" not in [e["transition"] for e in job["events"]]
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()
