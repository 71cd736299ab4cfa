"""Benchmark: tiny ``format=text`` jobs through the job queue, POST → worker → completed.

Against a real ``telha serve`` subprocess on 127.0.0.1: 5,000 distinct jobs POSTed as fast as
possible (bounded concurrency, 503s retried; keep-alive HTTP/1.1 over httpcore) with (1)
in-process ``text_worker`` consumers and (2) remote ``python -m workers_common.run
text_worker`` processes over gRPC; (3) 1,000 jobs at a steady 100 jobs/s offered load.
Throughput runs from the first POST to the latest ``completed`` event; latency is
``completed.at - enqueued.at`` from each job's events.

Floor, measured in the same run: per job one ``INSERT`` transaction and one ``UPDATE``
transaction on the ``jobs`` table (a fresh SQLite file migrated by :class:`SqliteStore`,
stdlib ``sqlite3``, WAL, synchronous=NORMAL).

With ``--engine postgres`` the same runs also go against ``[storage] engine = "postgres"`` (a
fresh database on ``TELHA_TEST_PG_DSN``'s server, else the throwaway cluster of
``scripts/pg-test-server``), plus two replicas on one database: POSTs round-robin over both,
half the worker processes attached to each. The table prints them beside the
SQLite rows. Anchor (procrastinate on PostgreSQL, this machine kind): ~226 no-op jobs/s,
p99 45 ms at 100 jobs/s; target: two replicas >= 600 jobs/s, p99 <= 100 ms at 100 jobs/s.

Targets printed (bench/RESULTS.md, "Targets"): in-process SQLite >= 1,000 jobs/s, gRPC >= 600,
p99 <= 10 ms at 100 jobs/s, in-process >= 0.7x SAQ's no-op rate in the same run.

With ``--webhooks`` it runs only the in-process SQLite load, twice: as above, then with every
job asking for a webhook (``options.webhook``) to a receiver on 127.0.0.1 in its own process
(``bench/hook_sink.py``), and prints the cost of delivery against the run without webhooks:
jobs/s to the last completion and to the last delivery received, and the CPU time of the
``telha serve`` process per job (steadier than throughput on a shared machine). Target:
deliveries cost at most 25% of the jobs/s.

With ``--peer saq`` the table also has SAQ on Redis (``bench/saq_peer.py``: Debian's
``redis-server`` on a free 127.0.0.1 port, started and stopped by the bench; ``saq`` from
PyPI in the bench's own venv, ``bench/.venv-saq``, made on first use, or ``--saq-python``):
the same number of jobs with a no-op handler, beside Telha's real text projection. Target:
in-process >= 0.7x SAQ's rate in the same run.

Run: ``.venv/bin/python bench/queue.py [--engine sqlite|postgres] [--concurrency N]
[--workers N] [--capacity N] [--webhooks] [--peer saq [--saq-python PATH]]``. Exits 0 whether
the targets pass or not; non-zero if a request fails or a job ends ``dead``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named queue.py: drop bench/ (sys.path[0]) so ``import queue`` finds the stdlib.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json
import os
import secrets
import subprocess
import tempfile
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpcore
from uuid_utils import uuid7

from bench.saq_peer import run as run_saq
from bench.saq_peer import saq_python
from telha.domain.model import Scope
from tests.support.floor import floor_db
from tests.support.pg import create_database, drop_databases
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


class Sink:
    """``bench/hook_sink.py`` in its own process: a webhook receiver that only counts."""

    def __enter__(self) -> Sink:
        script = Path(__file__).resolve().parent / "hook_sink.py"
        self.proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def wait_for(self, n: int, timeout_s: float) -> float:
        """Wait until ``n`` deliveries arrived; ``time.time()`` of the latest."""
        deadline = time.monotonic() + timeout_s
        async with httpcore.AsyncConnectionPool() as pool:
            while True:
                resp = await pool.request("GET", f"http://127.0.0.1:{self.port}/count")
                state = json.loads(resp.content)
                if state["n"] >= n:
                    return float(state["last"])
                if time.monotonic() > deadline:
                    raise BenchError(f"{state['n']} of {n} webhook deliveries")
                await anyio.sleep(0.1)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A request failed or a job ended ``dead``."""


class Response:
    """A whole HTTP response: status and body."""

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code = status_code
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class Client:
    """Keep-alive HTTP/1.1 requests to one server over an httpcore pool of ``connections``:
    the same requests httpx sends, without httpx's per-request layers (URL and header models,
    cookies, hooks), which cost the load client — sharing the cores with the servers it
    measures — about 30% of its CPU per request (0.65 → 0.46 ms per job measured)."""

    def __init__(self, base_url: str, key: str, connections: int) -> None:
        self._base = base_url
        self._headers = [(b"x-api-key", key.encode()), (b"content-type", b"application/json")]
        self._pool = httpcore.AsyncConnectionPool(
            max_connections=connections, max_keepalive_connections=connections
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._pool.aclose()

    async def request(self, method: str, path: str, body: Any = None) -> Response:
        """``method path`` with ``body`` as JSON (if given); the whole response."""
        content = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        resp = await self._pool.request(
            method, self._base + path, headers=self._headers, content=content,
            extensions={"timeout": {"connect": 60.0, "read": 60.0, "write": 60.0, "pool": 60.0}},
        )  # fmt: skip
        return Response(resp.status, resp.content)


async def post_jobs(
    clients: list[Client], tag: str, n: int, rate: float | None, hook: str | None = None
) -> list[str]:
    """POST ``n`` distinct text jobs (at ``rate`` jobs/s if given; each with a webhook to
    ``hook`` if given); their job ids in order."""
    ids: list[str] = [""] * n
    limit = anyio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> None:
        body: dict[str, Any] = {
            "format": "text", "name": f"{tag}-{i}.txt", "content": f"job {tag} {i}"
        }  # fmt: skip
        if hook is not None:
            body["options"] = {"webhook": {"url": hook}}
        async with limit:
            for _ in range(1000):
                resp = await clients[i % CLIENTS].request("POST", "/v1/ingest", body)
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


async def statuses(clients: list[Client], ids: list[str]) -> dict[str, dict[str, Any]]:
    """``GET /v1/ingest/{id}`` of each id, ``IN_FLIGHT`` at a time; raises on ``dead``."""
    out: dict[str, dict[str, Any]] = {}
    limit = anyio.Semaphore(IN_FLIGHT)

    async def one(i: int, job_id: str) -> None:
        async with limit:
            resp = await clients[i % CLIENTS].request("GET", f"/v1/ingest/{job_id}")
        if resp.status_code != 200:
            raise BenchError(f"GET job {job_id}: {resp.status_code} {resp.text[:500]}")
        out[job_id] = status = resp.json()
        if status["state"] == "dead":
            raise BenchError(f"job {job_id} is dead: {status.get('failureReason')}")

    async with anyio.create_task_group() as tg:
        for i, job_id in enumerate(ids):
            tg.start_soon(one, i, job_id)
    return out


async def wait_completed(clients: list[Client], ids: list[str]) -> list[dict[str, Any]]:
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


async def drive(
    base_urls: list[str], key: str, n: int, rate: float | None, receiver: Sink | None = None
) -> tuple[float, ...]:
    """A warm-up of 32 jobs, then the measured run of ``n`` jobs; the clients alternate over
    ``base_urls`` (one replica each), so POSTs go round-robin. With ``receiver``, every job
    has a webhook to it, and a fourth figure is jobs/s to the last delivery received."""
    hook = receiver.url() if receiver is not None else None
    per = IN_FLIGHT // CLIENTS
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(Client(base_urls[i % len(base_urls)], key, per))
            for i in range(CLIENTS)
        ]
        await wait_completed(clients, await post_jobs(clients, "warm", 32, None, hook))
        if receiver is not None:
            await receiver.wait_for(32, timeout_s=120)
        t0_us = time.time_ns() // 1000
        ids = await post_jobs(clients, f"run{time.time_ns()}", n, rate, hook)
        figures = measure(t0_us, await wait_completed(clients, ids))
        if receiver is None:
            return figures
        last = await receiver.wait_for(32 + n, timeout_s=600)
        return (*figures, n / (last - t0_us / 1e6))


def run_server(
    tmp: Path,
    workers: dict[str, Any],
    n: int,
    rate: float | None,
    remote: int = 0,
    cap: int = 1,
    *,
    engine: str = "sqlite",
    replicas: int = 1,
    receiver: Sink | None = None,
    cpu: list[float] | None = None,
) -> tuple[float, ...]:
    """Start ``replicas`` servers on one store (and ``remote`` worker processes, spread over
    them), drive them (every job with a webhook to ``receiver``, if given), stop
    everything. ``cpu`` gets the first server's CPU seconds spent while driven."""
    storage: dict[str, Any] = {}
    if engine == "postgres":
        storage = {"dsn": create_database(), "pool_size": 10}
    token = {"token_key": secrets.token_hex(32)}
    servers = []
    for _ in range(replicas):
        folder = Path(tempfile.mkdtemp(dir=tmp))
        config = write_config(
            folder, engine, workers=workers, ingest=INGEST, storage=storage, grpc=token,
            webhooks={"allowed_hosts": [f"127.0.0.1:{receiver.port}"] if receiver else []},
        )  # fmt: skip
        servers.append(ServerProcess(config).start())
    procs: list[subprocess.Popen[bytes]] = []
    try:
        key = servers[0].create_key(TENANT, ORG)
        if receiver is not None:
            cli = [sys.executable, "-m", "telha", "webhook", "secret", "--tenant", TENANT]
            cli += ["--org", ORG, "--config", str(servers[0].config)]
            subprocess.run(cli, check=True, capture_output=True)
        for i in range(remote):
            server = servers[i % replicas]
            env = server.worker_env(Scope(TENANT, ORG))
            cmd = [sys.executable, "-m", "workers_common.run", "text_worker"]
            with (server.config.parent / f"worker{i}.log").open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        [*cmd, "--capacity", str(cap)], env=env, stdout=log, stderr=log
                    )
                )
        assert servers[0].proc is not None
        before = cpu_s(servers[0].proc.pid)
        figures = anyio.run(drive, [s.base_url for s in servers], key, n, rate, receiver)
        if cpu is not None:
            cpu.append(cpu_s(servers[0].proc.pid) - before)
        return figures
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for server in servers:
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
    """Run the measurements and print the table; 1 if a request failed or a job died."""
    parser = argparse.ArgumentParser(prog="bench/queue.py")
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--concurrency", type=int, default=2, help="in-process consumers")
    parser.add_argument("--workers", type=int, default=4, help="remote worker processes")
    parser.add_argument("--capacity", type=int, default=1, help="jobs in flight per worker")
    parser.add_argument(
        "--webhooks", action="store_true", help="only the cost of webhook delivery (in-process)"
    )
    parser.add_argument(
        "--peer", choices=("saq",), default=None, help="also SAQ on Redis, no-op jobs"
    )
    parser.add_argument(
        "--saq-python", type=Path, default=None,
        help="a Python with saq installed (default: bench/.venv-saq, made on first use)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.webhooks:
        return webhook_cost(args.concurrency)
    saq_py = saq_python(args.saq_python) if args.peer == "saq" else None
    peer: tuple[float, float, float] | None = None
    local = {"in_process": ["text_worker"], "concurrency": args.concurrency}
    none: dict[str, Any] = {"in_process": []}
    remote = f"{args.workers} worker processes"
    if args.capacity != 1:
        remote = f"{args.workers} workers, capacity {args.capacity}"
    rows: list[tuple[str, float, float, float]] = []
    pg: dict[str, tuple[float, ...]] = {}
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name:
        tmp = Path(tmp_name)
        floor = run_floor(tmp, JOBS)
        try:
            inproc = run_server(tmp, local, JOBS, None)
            grpc = run_server(tmp, none, JOBS, None, args.workers, args.capacity)
            paced = run_server(tmp, local, PACED_JOBS, PACED_RATE)
            rows += [
                (f"sqlite in-process ({args.concurrency} cons.)", *inproc),
                (f"sqlite gRPC, {remote}", *grpc),
                (f"sqlite in-process {PACED_RATE:g} jobs/s", *paced),
            ]
            if saq_py is not None:
                peer = run_saq(saq_py, JOBS)
                rows.append(("peer: SAQ on Redis, no-op handler (1 worker)", *peer))
            if args.engine == "postgres":
                w, c = args.workers, args.capacity
                pg["inproc"] = run_server(tmp, local, JOBS, None, engine="postgres")
                pg["grpc"] = run_server(tmp, none, JOBS, None, w, c, engine="postgres")
                pg["paced"] = run_server(tmp, local, PACED_JOBS, PACED_RATE, engine="postgres")
                pg["two"] = run_server(tmp, none, JOBS, None, w, c, engine="postgres", replicas=2)
                pg["two_paced"] = run_server(
                    tmp, none, PACED_JOBS, PACED_RATE, w, c, engine="postgres", replicas=2
                )
                rows += [
                    (f"postgres in-process ({args.concurrency} cons.)", *pg["inproc"]),
                    (f"postgres gRPC, {remote}", *pg["grpc"]),
                    (f"postgres in-process {PACED_RATE:g} jobs/s", *pg["paced"]),
                    (f"postgres 2 replicas, gRPC, {remote}", *pg["two"]),
                    (f"postgres 2 replicas {PACED_RATE:g} jobs/s", *pg["two_paced"]),
                ]
        except Exception as exc:  # task groups wrap BenchError in an ExceptionGroup
            print(f"queue: failed: {exc!r}", file=sys.stderr)
            return 1
        finally:
            drop_databases()
    print(f"queue: {JOBS:,} tiny text jobs, POST → worker → completed")
    print(f"| {'path':<46} | jobs/s | p50 ms | p99 ms |")
    print(f"|{'-' * 48}|--------|--------|--------|")
    for name, rate, p50, p99 in rows:
        print(f"| {name:<46} | {rate:6,.0f} | {_ms(p50)} | {_ms(p99)} |")
    print(f"| {'floor (SQLite insert+update)':<46} | {floor:6,.0f} | {'-':>6} | {'-':>6} |")
    print(f"| {'anchor: procrastinate on PostgreSQL':<46} | {226:6,.0f} | {'-':>6} | {45:6.1f} |")
    print("(all jobs POSTed at once: latency there is mostly time queued behind the backlog;")
    print(" the anchor's p99 is at 100 jobs/s)")

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    print(
        f"targets: in-process >= 1,000 jobs/s: {verdict(inproc[0] >= 1000)};"
        f" gRPC >= 600 jobs/s: {verdict(grpc[0] >= 600)};"
        f" p99 <= 10 ms at 100 jobs/s: {verdict(paced[2] <= 10)}"
    )
    if peer is not None:
        ratio = inproc[0] / peer[0]
        ok = verdict(ratio >= 0.7)
        print(f"in-process / SAQ in the same run: {ratio:.2f} (target >= 0.7: {ok})")
    if pg:
        print(
            "postgres targets: 2 replicas >= 600 jobs/s:"
            f" {verdict(pg['two'][0] >= 600)};"
            f" p99 <= 100 ms at 100 jobs/s (2 replicas): {verdict(pg['two_paced'][2] <= 100)}"
        )
    return 0


def webhook_cost(concurrency: int, rounds: int = 2) -> int:
    """``--webhooks``: the in-process SQLite load without, then with, a webhook per job,
    ``rounds`` times alternately (a shared machine drifts); each pair's cost and the
    median."""
    local = {"in_process": ["text_worker"], "concurrency": concurrency}
    pairs: list[tuple[tuple[float, ...], tuple[float, ...], float, float]] = []
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name, Sink() as sink:
        tmp = Path(tmp_name)
        try:
            for _ in range(rounds):
                cpu: list[float] = []
                plain = run_server(tmp, local, JOBS, None, cpu=cpu)
                hooked = run_server(tmp, local, JOBS, None, receiver=sink, cpu=cpu)
                ms = [c * 1000 / (JOBS + 32) for c in cpu]
                pairs.append((plain, hooked, ms[0], ms[1]))
        except Exception as exc:  # task groups wrap BenchError in an ExceptionGroup
            print(f"queue: failed: {exc!r}", file=sys.stderr)
            return 1
    print(f"queue --webhooks: {JOBS:,} tiny text jobs, in-process ({concurrency} cons.), SQLite;")
    print("each round without, then with, a webhook per job (jobs/s to the last delivery)")
    print(f"| {'round':<5} | {'plain jobs/s':>12} | {'hooked jobs/s':>13} | cost |"
          f" {'CPU ms/job plain':>16} | {'hooked':>6} | cost |")  # fmt: skip
    print(f"|{'-' * 7}|{'-' * 14}|{'-' * 15}|------|{'-' * 18}|{'-' * 8}|------|")
    costs = []
    for i, (plain, hooked, cpu0, cpu1) in enumerate(pairs, start=1):
        costs.append(1 - hooked[3] / plain[0])
        print(
            f"| {i:<5} | {plain[0]:12,.0f} | {hooked[3]:13,.0f} | {costs[-1]:4.0%} |"
            f" {cpu0:16.2f} | {cpu1:6.2f} | {cpu1 / cpu0 - 1:4.0%} |"
        )
    median = sorted(costs)[len(costs) // 2] if len(costs) % 2 else sum(costs) / len(costs)
    verdict = "PASS" if median <= 0.25 else "FAIL"
    print(f"target: webhook delivery costs <= 25% of in-process jobs/s: {median:.0%}, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
