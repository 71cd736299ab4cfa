"""Benchmark: tiny ``format=text`` jobs through the job queue, POST → worker → completed.

Against a real ``telha serve`` subprocess on 127.0.0.1: 5,000 distinct jobs POSTed as fast as
possible (bounded concurrency, 503s retried) with (1) in-process ``text_worker`` consumers and
(2) remote ``python -m workers_common.run text_worker`` processes over gRPC; (3) 1,000 jobs at
a steady 100 jobs/s offered load. Throughput runs from the first POST to the latest
``completed`` event; latency is ``completed.at - enqueued.at`` from each job's events.

Floor, measured in the same run: per job one ``INSERT`` transaction and one ``UPDATE``
transaction on the ``jobs`` table (a fresh SQLite file migrated by :class:`SqliteStore`,
stdlib ``sqlite3``, WAL, synchronous=NORMAL).

Run: ``.venv/bin/python bench/queue.py [--concurrency N] [--workers N] [--capacity N]``.
Exits 0 whether the targets pass or not; non-zero if a request fails or a job ends ``dead``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named queue.py: drop bench/ (sys.path[0]) so ``import queue`` finds the stdlib.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import os
import subprocess
import tempfile
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
from uuid_utils import uuid7

from telha.model import Scope
from tests.support.floor import floor_db
from tests.support.server import ServerProcess, write_config

# httpcore tries ``import sniffio`` per request; absent, each failed import rescans sys.path.
sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]

JOBS = 5_000
PACED_JOBS, PACED_RATE = 1_000, 100.0
IN_FLIGHT = 32  # concurrent requests; the server admits up to ingest.max_concurrent POSTs
# httpcore checks every pooled connection on each request: small pools keep the client cheap.
CLIENTS = 8
TENANT, ORG = "bench", "main"
INGEST = {"max_concurrent": 64}


class BenchError(Exception):
    """A request failed or a job ended ``dead``."""


async def post_jobs(
    clients: list[httpx.AsyncClient], tag: str, n: int, rate: float | None
) -> list[str]:
    """POST ``n`` distinct text jobs (at ``rate`` jobs/s if given); their job ids in order."""
    ids: list[str] = [""] * n
    limit = anyio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> None:
        body = {"format": "text", "name": f"{tag}-{i}.txt", "content": f"job {tag} {i}"}
        async with limit:
            for _ in range(1000):
                resp = await clients[i % CLIENTS].post("/v1/ingest", json=body)
                if resp.status_code != 503:
                    break
                await anyio.sleep(0.002)
        if resp.status_code != 202:
            raise BenchError(f"POST {tag}-{i}: {resp.status_code} {resp.text[:500]}")
        ids[i] = resp.json()["jobId"]

    async with anyio.create_task_group() as tg:
        start = time.perf_counter()
        for i in range(n):
            if rate is None:
                await limit.acquire()  # back-pressure: no 5,000 tasks parked at once
                limit.release()
            else:
                await anyio.sleep(max(0.0, start + i / rate - time.perf_counter()))
            tg.start_soon(one, i)
    return ids


async def statuses(clients: list[httpx.AsyncClient], ids: list[str]) -> dict[str, dict[str, Any]]:
    """``GET /v1/ingest/{id}`` of each id, ``IN_FLIGHT`` at a time; raises on ``dead``."""
    out: dict[str, dict[str, Any]] = {}
    limit = anyio.Semaphore(IN_FLIGHT)

    async def one(i: int, job_id: str) -> None:
        async with limit:
            resp = await clients[i % CLIENTS].get(f"/v1/ingest/{job_id}")
        if resp.status_code != 200:
            raise BenchError(f"GET job {job_id}: {resp.status_code} {resp.text[:500]}")
        out[job_id] = status = resp.json()
        if status["state"] == "dead":
            raise BenchError(f"job {job_id} is dead: {status.get('failureReason')}")

    async with anyio.create_task_group() as tg:
        for i, job_id in enumerate(ids):
            tg.start_soon(one, i, job_id)
    return out


async def wait_completed(clients: list[httpx.AsyncClient], ids: list[str]) -> list[dict[str, Any]]:
    """Poll the newest pending jobs until they complete, then check the rest; all statuses."""
    done: dict[str, dict[str, Any]] = {}
    pending = list(ids)
    with anyio.fail_after(600):
        while pending:
            await anyio.sleep(0.2)
            tail = await statuses(clients, pending[-4:])
            if all(s["state"] == "completed" for s in tail.values()):
                done.update(await statuses(clients, pending))
                pending = [j for j in pending if done[j]["state"] != "completed"]
    return [done[j] for j in ids]


def measure(t0_us: int, jobs: list[dict[str, Any]]) -> tuple[float, float, float]:
    """(jobs/s from ``t0_us`` to the last completion, p50 ms, p99 ms of enqueue→completed)."""
    lat, last = [], 0
    for job in jobs:
        at = {e["transition"]: e["at"] for e in job["events"]}
        lat.append((at["completed"] - at["enqueued"]) / 1e3)
        last = max(last, at["completed"])
    lat.sort()
    return len(jobs) / ((last - t0_us) / 1e6), lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


async def drive(base_url: str, key: str, n: int, rate: float | None) -> tuple[float, ...]:
    """A warm-up of 32 jobs, then the measured run of ``n`` jobs."""
    per = IN_FLIGHT // CLIENTS
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=base_url, headers={"x-api-key": key}, timeout=60.0, limits=limits
                )
            )
            for _ in range(CLIENTS)
        ]
        await wait_completed(clients, await post_jobs(clients, "warm", 32, None))
        t0_us = time.time_ns() // 1000
        ids = await post_jobs(clients, f"run{time.time_ns()}", n, rate)
        return measure(t0_us, await wait_completed(clients, ids))


def run_server(
    tmp: Path, workers: dict[str, Any], n: int, rate: float | None, remote: int = 0, cap: int = 1
) -> tuple[float, ...]:
    """Start a server (and ``remote`` worker processes), drive it, stop everything."""
    folder = Path(tempfile.mkdtemp(dir=tmp))
    server = ServerProcess(write_config(folder, workers=workers, ingest=INGEST)).start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        key = server.create_key(TENANT, ORG)
        env = server.worker_env(Scope(TENANT, ORG))
        for i in range(remote):
            cmd = [sys.executable, "-m", "workers_common.run", "text_worker"]
            with (folder / f"worker{i}.log").open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        [*cmd, "--capacity", str(cap)], env=env, stdout=log, stderr=log
                    )
                )
        return anyio.run(drive, server.base_url, key, n, rate)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if server.stop() != 0:
            print(f"warning: telha serve exited non-zero; log in {server.log}", file=sys.stderr)


def run_floor(tmp: Path, n: int) -> float:
    """jobs/s of ``n`` × (INSERT transaction + UPDATE transaction) on the jobs table."""
    conn = floor_db(tmp / "floor.db")
    try:
        t0 = time.perf_counter()
        for i in range(n):
            job_id, now = uuid7().bytes, time.time_ns() // 1000
            payload = b'{"format":"text","name":"f-%d.txt","content_b64":"am9i"}' % i
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO jobs (job_id, scope_id, kind, format, source_id, content_hash,"
                " payload, state, available_at, created_at, updated_at)"
                " VALUES (?, 1, 'ingest:text', 'text', ?, ?, ?, 'pending', ?, ?, ?)",
                (job_id, uuid7().bytes, os.urandom(32), payload, now, now, now),
            )
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "UPDATE jobs SET state = 'completed', updated_at = ? WHERE job_id = ?",
                (time.time_ns() // 1000, job_id),
            )
            conn.execute("COMMIT")
        return n / (time.perf_counter() - t0)
    finally:
        conn.close()


def _ms(x: float) -> str:
    """Milliseconds in six columns."""
    return f"{x:6.1f}" if x < 1000 else f"{x:6,.0f}"


def main() -> int:
    """Run the four measurements and print the table; 1 if a request failed or a job died."""
    parser = argparse.ArgumentParser(prog="bench/queue.py")
    parser.add_argument("--concurrency", type=int, default=2, help="in-process consumers")
    parser.add_argument("--workers", type=int, default=4, help="remote worker processes")
    parser.add_argument("--capacity", type=int, default=1, help="jobs in flight per worker")
    args = parser.parse_args()
    local = {"in_process": ["text_worker"], "concurrency": args.concurrency}
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name:
        tmp = Path(tmp_name)
        floor = run_floor(tmp, JOBS)
        try:
            inproc = run_server(tmp, local, JOBS, None)
            grpc = run_server(tmp, {"in_process": []}, JOBS, None, args.workers, args.capacity)
            paced = run_server(tmp, local, PACED_JOBS, PACED_RATE)
        except Exception as exc:  # task groups wrap BenchError in an ExceptionGroup
            print(f"queue: failed: {exc!r}", file=sys.stderr)
            return 1
    remote = f"{args.workers} worker processes"
    if args.capacity != 1:
        remote = f"{args.workers} workers, capacity {args.capacity}"
    rows = [
        (f"in-process ({args.concurrency} consumers)", *inproc),
        (f"gRPC, {remote}", *grpc),
        (f"in-process at {PACED_RATE:g} jobs/s", *paced),
    ]
    print(f"queue: {JOBS:,} tiny text jobs, POST → worker → completed")
    print("| path                         | jobs/s | p50 ms | p99 ms |")
    print("|------------------------------|--------|--------|--------|")
    for name, rate, p50, p99 in rows:
        print(f"| {name:<28} | {rate:6,.0f} | {_ms(p50)} | {_ms(p99)} |")
    print(f"| {'floor (SQLite insert+update)':<28} | {floor:6,.0f} | {'-':>6} | {'-':>6} |")
    print("(all jobs POSTed at once: latency there is mostly time queued behind the backlog)")

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    print(
        f"targets: in-process >= 500 jobs/s: {verdict(inproc[0] >= 500)};"
        f" gRPC >= 300 jobs/s: {verdict(grpc[0] >= 300)};"
        f" p99 <= 250 ms at 100 jobs/s: {verdict(paced[2] <= 250)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
