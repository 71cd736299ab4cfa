"""Several ``telha serve`` replicas on one PostgreSQL database (docs/operations.md): two real
server processes started at once (one applies the migrations), real remote worker processes
attached to each, real sockets.

- The same bytes POSTed to both replicas at once make exactly one job (worker formats) or one
  version (the JSON bypass).
- A job enqueued through replica A reaches a worker polling replica B at once (LISTEN/NOTIFY),
  not at the poll safety net.
- A job leased through replica A and cancelled through replica B: A's worker gets the
  ``cancel`` message within about a second (B's NOTIFY makes A check its leases) and is
  refused by the bumped lease generation.
- 2,000 tiny jobs posted round-robin: every job completes exactly once, no lease generation is
  handed out twice, one version per source. Then replica A is SIGKILLed mid-load: the jobs its
  workers held expire, are reaped by B and finish through B's workers.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import asyncpg
import httpx
import pytest
from grpclib import GRPCError, Status
from httpx_sse import aconnect_sse

from telha.domain.model import Scope
from telha_proto.telha.worker.v1 import JobPayload
from tests.support.pg import create_database, require_engine
from tests.support.server import ServerProcess, telha_check, write_config
from tests.support.worker import ScriptedWorker, scripted_worker

pytestmark = pytest.mark.anyio

#: Jobs of the round-robin load (the payload JSON names the source; base64 has no "-").
_ROUND_ROBIN = "convert_from(payload, 'UTF8') LIKE '%rr-%'"
LEASE_S = 3.0
JOBS = 2000
WORKERS_PER_REPLICA = 2


class Pair:
    """Two replicas on one database, their worker processes, a key of one scope."""

    def __init__(self, a: ServerProcess, b: ServerProcess, dsn: str, folder: Path) -> None:
        self.a, self.b, self.dsn, self.folder = a, b, dsn, folder
        self.scope = Scope("replicas", "org")
        self.key = a.create_key(self.scope.tenant_id, self.scope.organization_id)
        self.workers: list[subprocess.Popen[bytes]] = []

    def spawn_workers(self, server: ServerProcess, name: str, count: int) -> None:
        for i in range(count):
            log = (self.folder / f"worker-{name}-{i}.log").open("wb")
            argv = ["-m", "workers_common.run", "text_worker", "--capacity", "4"]
            self.workers.append(
                subprocess.Popen(
                    [sys.executable, *argv, "--worker-id", f"{name}-{i}"],
                    env=server.worker_env(None),
                    stderr=log,
                )
            )
            log.close()

    def stop_workers(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
        for proc in self.workers:
            proc.wait(10)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    require_engine("postgres")  # several replicas share a database; SQLite is one process
    dsn = create_database()
    token_key = secrets.token_hex(32)
    servers = []
    for name in ("a", "b"):
        folder = tmp_path_factory.mktemp(f"replica-{name}")
        config = write_config(
            folder,
            "postgres",
            storage={"dsn": dsn, "pool_size": 6},
            grpc={"token_key": token_key},
            workers={"in_process": []},
            jobs={"lease_secs": LEASE_S, "reap_interval_s": 0.2, "backoff_base_ms": 10},
        )
        servers.append(ServerProcess(config))
    # Started at once: both migrate the empty database; the advisory lock lets one apply.
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(ServerProcess.start, servers))
    p = Pair(servers[0], servers[1], dsn, tmp_path_factory.mktemp("replica-workers"))
    try:
        yield p
    finally:
        p.stop_workers()
        for s in servers:
            if s.proc is not None and s.proc.poll() is None:
                assert s.stop() == 0, s.log_text()


@pytest.fixture
async def clients(pair: Pair) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    headers = {"x-api-key": pair.key}
    async with (
        httpx.AsyncClient(base_url=pair.a.base_url, headers=headers, timeout=30) as a,
        httpx.AsyncClient(base_url=pair.b.base_url, headers=headers, timeout=30) as b,
    ):
        yield a, b


async def _query(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def test_same_bytes_to_both_replicas_make_one_job_or_version(
    pair: Pair, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    a, b = clients
    for i in range(20):
        bodies = [
            {"format": "text", "name": f"dup-{i}.txt", "content": f"same bytes {i}"},
            {"format": "json", "name": f"dup-{i}.json", "content": f'[{{"n": {i}}}]'},
        ]
        for body in bodies:
            answers: list[httpx.Response] = []

            async def post(
                c: httpx.AsyncClient,
                body: dict[str, str] = body,
                answers: list[httpx.Response] = answers,
            ) -> None:
                answers.append(await c.post("/v1/ingest", json=body))

            async with anyio.create_task_group() as tg:
                tg.start_soon(post, a)
                tg.start_soon(post, b)
            codes = sorted(r.status_code for r in answers)
            if body["format"] == "json":
                assert codes == [200, 201], [r.text for r in answers]
            else:
                assert codes == [200, 202], [r.text for r in answers]
                ids = {r.json()["jobId"] for r in answers}
                assert len(ids) == 1, answers  # the dedup answer names the same job
    rows = await _query(
        pair.dsn,
        "SELECT (SELECT count(*) FROM jobs WHERE kind = 'ingest:text'),"
        " (SELECT count(*) FROM source_versions WHERE format = 'json')",
    )
    assert tuple(rows[0]) == (20, 20)


async def test_a_job_enqueued_on_one_replica_wakes_a_poller_on_the_other(
    pair: Pair, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    """A worker waits on B (its poll is parked on B's wake-up); the job is posted to A. The
    poll safety net is 5 s; the NOTIFY gets it there in well under that."""
    a, _ = clients
    pair.spawn_workers(pair.b, "wake-b", 1)
    await anyio.sleep(3)  # the worker connects and parks its poll
    started = time.monotonic()
    posted = await a.post("/v1/ingest", json={"format": "text", "name": "w", "content": "w"})
    job_id = posted.json()["jobId"]
    with anyio.fail_after(20):
        while True:
            if (await a.get(f"/v1/ingest/{job_id}")).json()["state"] == "completed":
                break
            await anyio.sleep(0.02)
    assert time.monotonic() - started < 4.0
    pair.stop_workers()
    pair.workers.clear()


async def test_a_worker_lost_on_one_replica_hands_its_job_to_a_worker_on_the_other(
    pair: Pair, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    """Fast failover across replicas: a worker holding a job through A goes away; a worker
    already waiting on B leases it (A writes ``worker_lost``; its NOTIFY wakes B's poller)."""
    a, _ = clients
    token = pair.a.worker_token(pair.scope)
    body = {"format": "code", "name": "failover.py", "content": "x = 1"}
    job_id = (await a.post("/v1/ingest", json=body)).json()["jobId"]
    got: list[str] = []
    async with (
        scripted_worker(pair.b.grpc_addr, token, "on-b") as on_b,
        scripted_worker(pair.a.grpc_addr, token, "on-a") as on_a,
    ):
        held = await on_a.next_job(["code"])

        async def wait_on_b() -> None:
            got.append((await on_b.next_job(["code"], within_s=30)).job_id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_on_b)
            await anyio.sleep(0.3)  # B's poll is parked on its wake-up
            await on_a.heartbeat(held)  # far from expiry when its stream closes
            on_a.go_away()
        # Read while B's worker still holds the job: leaving the block closes its stream too
        # (a second worker_lost).
        job = (await a.get(f"/v1/ingest/{job_id}")).json()
    assert got == [job_id] == [held.job_id]
    events = [(e["transition"], e["detail"]) for e in job["events"]]
    assert [t for t, _ in events] == ["enqueued", "leased", "worker_lost", "leased"]
    assert events[1][1] == "worker=on-a" and events[3][1] == "worker=on-b"


async def test_a_cancel_through_one_replica_reaches_the_worker_on_the_other(
    pair: Pair, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    # A scope of its own: an earlier test's job left pending must not be the one leased.
    scope = Scope("replicas-cancel", "org")
    key = pair.a.create_key(scope.tenant_id, scope.organization_id)
    token = pair.a.worker_token(scope)
    body = {"format": "code", "name": "cancel-across.py", "content": "x = 1"}
    headers = {"x-api-key": key}
    async with (
        httpx.AsyncClient(base_url=pair.a.base_url, headers=headers, timeout=30) as a,
        httpx.AsyncClient(base_url=pair.b.base_url, headers=headers, timeout=30) as b,
    ):
        await _cancel_across(pair, a, b, token, body)


async def _cancel_across(
    pair: Pair, a: httpx.AsyncClient, b: httpx.AsyncClient, token: str, body: dict[str, str]
) -> None:
    job_id = (await a.post("/v1/ingest", json=body)).json()["jobId"]
    async with (
        scripted_worker(pair.a.grpc_addr, token, "held-on-a") as on_a,
        anyio.create_task_group() as beats,
    ):
        held = await on_a.next_job(["code"])
        assert held.job_id == job_id

        async def keep_lease() -> None:  # leases last 3 s here: a loaded machine is slow
            with suppress(GRPCError):
                while True:
                    await on_a.heartbeat(held)
                    await anyio.sleep(0.5)

        beats.start_soon(keep_lease)
        started = time.monotonic()
        resp = await b.post(f"/v1/ingest/{job_id}/cancel")
        assert resp.status_code == 200 and resp.json()["state"] == "cancelled", resp.text
        assert "held-on-a" in resp.json()["events"][-1]["detail"]  # a lease was revoked
        cancel = await on_a.cancel_message(held, within_s=10)
        beats.cancel_scope.cancel()
        # B's NOTIFY wakes A's check at once; A's reaper tick (0.2 s here) is the safety net.
        assert time.monotonic() - started < 2.0
        assert (cancel.job_id, cancel.lease_generation) == (job_id, held.lease_generation)
        with pytest.raises(GRPCError) as err:
            await on_a.heartbeat(held)
        assert err.value.status is Status.FAILED_PRECONDITION
        with pytest.raises(GRPCError) as err:
            await on_a.submit(held, {"v": 1, "canonicalText": ""})
        assert err.value.status is Status.FAILED_PRECONDITION
    job = (await a.get(f"/v1/ingest/{job_id}")).json()
    assert [e["transition"] for e in job["events"]] == ["enqueued", "leased", "cancelled"]
    rows = await _query(
        pair.dsn, "SELECT count(*) FROM source_versions WHERE name = 'cancel-across.py'"
    )
    assert rows[0][0] == 0


async def _heartbeats(worker: ScriptedWorker, job: JobPayload) -> None:
    while True:
        await worker.heartbeat(job)
        await anyio.sleep(0.5)


async def test_events_written_through_one_replica_reach_a_stream_on_the_other(
    pair: Pair, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    """``GET /v1/ingest/{jobId}/events`` served by B, the job leased and completed through A:
    B finds A's events by re-reading (``server.events_reread_s``, 1 s), in order, and ends
    the stream after the terminal one."""
    a, b = clients
    # A format no other test here polls (the failover test leaves a pending code job).
    body = {"format": "html", "name": "events.html", "content": "<p>y</p>"}
    job_id = (await a.post("/v1/ingest", json=body)).json()["jobId"]
    token = pair.a.worker_token(pair.scope)
    send, events = anyio.create_memory_object_stream[tuple[int, str]](16)

    async def read_on_b() -> None:
        async with send, aconnect_sse(b, "GET", f"/v1/ingest/{job_id}/events") as source:
            assert source.response.status_code == 200
            async for sse in source.aiter_sse():
                await send.send((int(sse.id), json.loads(sse.data)["transition"]))

    async def next_event() -> tuple[int, str]:
        with anyio.fail_after(4):  # the 1 s re-read, with room for a loaded machine
            return await events.receive()

    submission = {"v": 1, "canonicalText": "y\n", "spans": [], "nodes": [],
                  "relationships": []}  # fmt: skip
    with events:
        async with (
            anyio.create_task_group() as tg,
            scripted_worker(pair.a.grpc_addr, token) as w,
        ):
            tg.start_soon(read_on_b)
            assert await next_event() == (1, "enqueued")
            job = await w.next_job(["html"])
            assert job.job_id == job_id
            async with anyio.create_task_group() as beats:  # the lease is 3 s; B's wait up to 4
                beats.start_soon(_heartbeats, w, job)
                assert await next_event() == (2, "leased")
                beats.cancel_scope.cancel()
            assert (await w.submit(job, submission)).accepted
            assert await next_event() == (3, "completed")
            with anyio.fail_after(4):
                assert [e async for e in events] == []  # B ended the stream


async def _post_round_robin(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], first: int, count: int
) -> None:
    send, recv = anyio.create_memory_object_stream[int](16)

    async def producer() -> None:
        async with send:
            for i in range(first, first + count):
                await send.send(i)

    async def poster(recv: anyio.abc.ObjectReceiveStream[int]) -> None:
        async with recv:
            async for i in recv:
                c = clients[i % 2]
                body = {"format": "text", "name": f"rr-{i}.txt", "content": f"tiny job {i}"}
                while True:
                    resp = await c.post("/v1/ingest", json=body)
                    # Over the replica's concurrency limit (503) or the scope's share of
                    # it (429, docs/operations.md "Fair slots"): retry.
                    if resp.status_code not in (429, 503):
                        break
                    await anyio.sleep(0.05)
                assert resp.status_code == 202, resp.text

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        with recv:
            for _ in range(12):
                tg.start_soon(poster, recv.clone())


async def _wait_completed(dsn: str, total: int, within_s: float) -> None:
    with anyio.fail_after(within_s):
        while True:
            rows = await _query(
                dsn, f"SELECT count(*) FROM jobs WHERE state = 'completed' AND {_ROUND_ROBIN}"
            )
            if int(rows[0][0]) >= total:
                return
            await anyio.sleep(0.25)


async def _check_exactly_once(dsn: str, total: int) -> None:
    rows = await _query(
        dsn,
        "SELECT j.job_id, j.state, j.lease_generation,"
        " count(*) FILTER (WHERE e.transition = 'leased') AS leased,"
        " count(*) FILTER (WHERE e.transition = 'completed') AS completed"
        " FROM jobs j JOIN job_events e ON e.job_id = j.job_id"
        f" WHERE {_ROUND_ROBIN.replace('payload', 'j.payload')} GROUP BY j.job_id",
    )
    assert len(rows) == total
    for r in rows:
        assert r["state"] == "completed" and r["completed"] == 1, dict(r)
        # One leased event per generation: no generation was handed out twice.
        assert r["leased"] == r["lease_generation"], dict(r)
    dups = await _query(
        dsn,
        "SELECT source_id, count(*) FROM source_versions WHERE name LIKE 'rr-%'"
        " GROUP BY source_id HAVING count(*) > 1",
    )
    assert dups == []
    versions = await _query(dsn, "SELECT count(*) FROM source_versions WHERE name LIKE 'rr-%'")
    assert int(versions[0][0]) == total


async def test_round_robin_load_exactly_once_then_a_replica_dies(
    pair: Pair, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    pair.spawn_workers(pair.a, "replica-a", WORKERS_PER_REPLICA)
    pair.spawn_workers(pair.b, "replica-b", WORKERS_PER_REPLICA)
    half = JOBS // 2
    await _post_round_robin(clients, 0, half)
    await _wait_completed(pair.dsn, half, 120)
    await _check_exactly_once(pair.dsn, half)

    # Mid-load: A's workers are frozen (SIGSTOP) with their polls parked on A, so the jobs A
    # leases to them during the second half stay in their hands; then A is SIGKILLed. The
    # jobs still leased to A's workers are stranded: nothing can complete them through A.
    # B's workers are frozen too while the second half is posted: each open stream takes at
    # most its capacity, so B cannot drain everything before A leases to its own (a race that
    # failed once under a quiet machine), and A's workers are sure to hold leases.
    a_workers = pair.workers[:WORKERS_PER_REPLICA]
    b_workers = pair.workers[WORKERS_PER_REPLICA:]
    for w in pair.workers:
        os.kill(w.pid, signal.SIGSTOP)
    mark = await _query(pair.dsn, "SELECT coalesce(max(at), 0) FROM job_events")
    await _post_round_robin(clients, half, half)
    # Read from the job events, not the jobs' current state: on a loaded machine posting the
    # second half outlasts the lease (3 s), so the first leases A handed its frozen workers
    # may already have expired and been put back by the time the posting ends.
    held = (
        "SELECT DISTINCT job_id FROM job_events WHERE at > $1 AND transition = 'leased'"
        " AND detail LIKE 'worker=replica-a-%'"
    )
    stranded: list[asyncpg.Record] = []
    for _ in range(600):  # 30 s at most: A leases to its (frozen) workers' open streams
        if stranded := await _query(pair.dsn, held, mark[0][0]):
            break
        await anyio.sleep(0.05)
    assert pair.a.proc is not None
    os.kill(pair.a.proc.pid, signal.SIGKILL)
    pair.a.proc.wait(10)
    assert stranded, "replica A never leased to its workers during the second half"
    for w in b_workers:
        os.kill(w.pid, signal.SIGCONT)
    for w in a_workers:
        os.kill(w.pid, signal.SIGCONT)  # they come back to a dead replica
    await _wait_completed(pair.dsn, JOBS, 180)
    await _check_exactly_once(pair.dsn, JOBS)
    # The consistency checker agrees, read through the surviving replica's config.
    checked = telha_check(pair.b.config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A's workers could not submit through a dead replica: their leases ran out, B's reaper
    # put the jobs back and B's workers finished them.
    for row in stranded:
        events = await _query(
            pair.dsn,
            "SELECT transition, detail FROM job_events WHERE job_id = $1 ORDER BY seq",
            row[0],
        )
        transitions = [e[0] for e in events]
        assert "lease_expired" in transitions, transitions
        last_lease = [e[1] for e in events if e[0] == "leased"][-1]
        assert last_lease.startswith("worker=replica-b-"), events
