"""Fast failover and the poison cap against the service on both engines (in-process,
:mod:`tests.support.inproc`; a ``telha serve`` subprocess where an in-process consumer
dies and the process must live on): a worker whose ``PollJobs`` stream ends (process
SIGKILLed, process stopped, stream cancelled, in-process consumer task dead) hands its jobs
back at once (``worker_lost``, a failed attempt) to a worker already waiting, long before
its lease could expire; the old generation is fenced off; a job lost
``jobs.max_worker_losses`` times is dead."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator

import anyio
import pytest
from grpclib import GRPCError, Status

from telha_proto.telha.worker.v1 import JobPayload
from tests.support.inproc import Server
from tests.support.queue_env import Tenant, queue_server, text_submission, transitions
from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_job, wait_job_blocking
from tests.support.worker import ScriptedWorker, scripted_worker

pytestmark = pytest.mark.anyio

#: Far longer than any wait below: a job that comes back came back by failover, not expiry.
LEASE_S = 300.0


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[Server]:
    with queue_server(
        tmp_path_factory, f"failover-{engine}", LEASE_S, engine, in_process=True
    ) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _take_over(
    tenant: Tenant, fresh: ScriptedWorker, end: Callable[[], None], *, job_id: object
) -> JobPayload:
    """With ``fresh`` already waiting for a ``code`` job, end the job's holder (``end()``, in
    a thread) once it holds the job, and return what ``fresh`` leases."""
    got: list[JobPayload] = []

    async def wait_for_job() -> None:
        got.append(await fresh.next_job(["code"], within_s=30))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_for_job)
        await anyio.sleep(0.2)  # the fresh worker's stream is open and waiting
        await anyio.to_thread.run_sync(end)
    return got[0]


def _kill(proc: subprocess.Popen[bytes], sig: int) -> None:
    proc.send_signal(sig)
    proc.wait(20)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
async def test_ended_worker_process_job_goes_to_a_waiting_worker(
    tenant: Tenant, worker: ScriptedWorker, sig: int
) -> None:
    """A remote worker process holding a lease is SIGKILLed (or stopped with SIGTERM, a
    clean cancel of its stream): a second, waiting worker leases the job at once; the lost
    worker's generation can neither heartbeat nor submit, and its submission writes nothing."""
    posted = await tenant.post("code", "hold.py", "x = 1")
    proc = tenant.server.spawn_worker("tests.support.crashing_worker", tenant.scope, HOLD_S="600")
    try:
        worker_id = await _worker_id(tenant, posted["jobId"])
        job = await _take_over(tenant, worker, lambda: _kill(proc, sig), job_id=posted["jobId"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert job.job_id == posted["jobId"] and job.lease_generation == 2 and job.attempts == 1
    state = await tenant.job(job.job_id)
    assert transitions(state) == ["enqueued", "leased", "worker_lost", "leased"]
    lost = state["events"][2]  # type: ignore[index]
    assert worker_id in lost["detail"] and "PollJobs stream ended" in lost["detail"]
    stale = JobPayload(job_id=job.job_id, lease_generation=1)
    for call in (worker.heartbeat(stale), worker.submit(stale, text_submission("x = 1"))):
        with pytest.raises(GRPCError) as err:
            await call
        assert err.value.status is Status.FAILED_PRECONDITION
    source = await tenant.client.get(f"/v1/sources/{posted['sourceId']}")
    assert source.status_code == 200 and source.json()["versions"] == []  # nothing written
    assert (await tenant.job(job.job_id))["state"] == "leased"  # the new lease is untouched
    assert (await worker.submit(job, text_submission("x = 1"))).accepted
    done = await tenant.job(job.job_id)
    assert done["state"] == "completed" and done["attempts"] == 2
    assert transitions(done) == ["enqueued", "leased", "worker_lost", "leased", "completed"]


async def _worker_id(tenant: Tenant, job_id: object) -> str:
    with anyio.fail_after(30):
        while True:
            events = (await tenant.job(job_id))["events"]
            leases = [e for e in events if e["transition"] == "leased"]  # type: ignore[union-attr, index]
            if leases:
                return str(leases[-1]["detail"]).removeprefix("worker=")
            await anyio.sleep(0.05)


async def test_a_cancelled_stream_returns_its_jobs(tenant: Tenant, worker: ScriptedWorker) -> None:
    """A client that cancels its PollJobs stream (a worker shutting down) hands back every
    unfinished job it held; the finished ones stay finished."""
    posted = [await tenant.post("code", f"c{i}.py", f"x = {i}") for i in range(3)]
    async with scripted_worker(tenant.server.grpc_addr, tenant.token, "leaving") as leaving:
        held = [await leaving.next_job(["code"]) for _ in range(3)]
        assert (await leaving.submit(held[0], text_submission("x = 0"))).accepted
    # Leaving the context cancelled the two streams still holding a job.
    again = sorted([(await worker.next_job(["code"])).job_id for _ in range(2)])
    assert again == sorted(h.job_id for h in held[1:])
    for p in posted[1:]:
        job = await tenant.job(p["jobId"])
        assert transitions(job) == ["enqueued", "leased", "worker_lost", "leased"]
        assert job["attempts"] == 2  # attempts made: the lost one and this one
    assert (await tenant.job(posted[0]["jobId"]))["state"] == "completed"


async def test_a_job_that_kills_its_worker_is_dead_after_three_losses(tenant: Tenant) -> None:
    """The poison cap: a job whose input ends its worker process is lost with it three times
    (``jobs.max_worker_losses``' default), then dead as ``resource_limit``; the fleet goes on
    with the next job."""
    poison = await tenant.post("code", "crash-process.py", "boom")
    fine = await tenant.post("code", "fine.py", "x = 1")
    crashes = 0
    with anyio.fail_after(60):
        while (await tenant.job(poison["jobId"]))["state"] != "dead":
            proc = tenant.server.spawn_worker("tests.support.crashing_worker", tenant.scope)
            code = await anyio.to_thread.run_sync(proc.wait)
            assert code == 17
            crashes += 1
            # Its exit reaches core as a closed connection: wait for that loss to be written.
            await wait_job(tenant.client, poison["jobId"], "pending", "dead")
    dead = await tenant.job(poison["jobId"])
    assert crashes == 3 and dead["attempts"] == 3
    assert dead["failureReason"] == "resource_limit: worker lost 3 times"
    assert transitions(dead) == ["enqueued", *["leased", "worker_lost"] * 3, "dead"]
    details = [e["detail"] for e in dead["events"] if e["transition"] == "worker_lost"]  # type: ignore[union-attr, index]
    assert [d.endswith(f"(loss {n})") for n, d in enumerate(details, 1)] == [True] * 3
    proc = tenant.server.spawn_worker("tests.support.crashing_worker", tenant.scope)
    try:
        assert (await wait_job(tenant.client, fine["jobId"], "completed", within_s=30))[
            "attempts"
        ] == 1
    finally:
        proc.terminate()
        proc.wait(20)


def test_in_process_consumer_death_loses_its_job(
    tmp_path_factory: pytest.TempPathFactory, engine: str
) -> None:
    """In-process pools: a consumer task that dies (its handler raised what no consumer
    catches) hands
    its job back like a dead remote worker, and is restarted; the other consumer leases the job
    at once; after ``max_worker_losses`` (2 here) the job is dead, and ``telha serve`` lives on
    to complete the next job."""
    import httpx

    folder = tmp_path_factory.mktemp(f"inproc-{engine}")
    config = write_config(
        folder,
        engine,
        workers={"in_process": ["tests.support.crashing_worker"], "concurrency": 2},
        jobs={"lease_secs": LEASE_S, "max_worker_losses": 2, "backoff_base_ms": 10},
    )
    with ServerProcess(config) as server:
        key = server.create_key("t", "o")
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
            poison = c.post(
                "/v1/ingest", json={"format": "code", "name": "crash-task.py", "content": "1"}
            ).json()
            job = wait_job_blocking(c, poison["jobId"], "dead")
            assert job["failureReason"] == "resource_limit: worker lost 2 times"
            assert [e["transition"] for e in job["events"]] == [
                "enqueued", "leased", "worker_lost", "leased", "worker_lost", "dead",
            ]  # fmt: skip
            lost = [e["detail"] for e in job["events"] if e["transition"] == "worker_lost"]
            assert all("in-process worker in-process:tests.support" in d for d in lost)
            assert all("died (" in d for d in lost)
            fine = c.post(
                "/v1/ingest", json={"format": "code", "name": "fine.py", "content": "x = 1"}
            ).json()
            assert wait_job_blocking(c, fine["jobId"], "completed")["attempts"] == 1
        assert server.proc is not None and server.proc.poll() is None
        assert server.stop() == 0, server.log_text()
    assert '"in_process_worker_died"' in server.log_text()
