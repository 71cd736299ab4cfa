"""Where a tiny job's time goes: ``bench/queue.py``'s in-process SQLite run (5,000 tiny text
jobs POSTed, worked by in-process ``text_worker`` consumers) against one ``telha serve``,
measured three ways at once, with no change to the product:

- **CPU by function**: ``py-spy record`` on the server and its process-pool workers
  (``--subprocesses``), raw stacks, folded into the stages of a job (:data:`STAGES`) by the
  first stage function each stack passes through (innermost wins);
- **CPU by thread**: ``/proc/PID/task/*/stat`` before and after the measured run, threads
  named by ``py-spy dump``;
- **SQL statements per job**: every statement the server's SQLite connections run, counted
  through ``sqlite3``'s trace callback by a ``sitecustomize`` this script puts on the
  server's ``PYTHONPATH`` (``BENCH_SQL_TRACE`` names the file it writes its counts to).

Run: ``.venv/bin/python bench/queue_profile.py [--jobs 5000] [--concurrency 2] [--out DIR]``;
prints the three tables (Markdown) and keeps the raw profile in ``DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds queue.py: drop it (sys.path[0]) so ``import queue`` finds the stdlib.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import anyio

from bench.queue import CLIENTS, Client, drive, post_jobs, wait_completed
from tests.support.server import ServerProcess, write_config

PY_SPY = Path(sys.executable).parent / "py-spy"
#: Stages a job passes through, each with the frames (substrings of py-spy's ``function
#: (path:line)``) whose time is its own. A stack counts for the innermost frame that names a
#: stage here; a stack naming none counts for the first of :data:`GENERIC` it matches.
STAGES: dict[str, tuple[str, ...]] = {
    "webhooks (rows, deliverer)": (
        "telha/webhooks/deliverer.py",
        "webhooks/deliveries.py",
        "webhooks/subscriptions.py",
    ),
    "search-index upkeep": ("telha/search/indexer.py", "search/index.py"),
    "events (job event rows, live streams)": ("jobs/events.py", "add_event (", "job_watch.py"),
    "publish": ("versions/publish.py",),
    "submission commit (version, nodes, spans, complete)": (
        "versions/commit.py",
        "sqlite/rows.py",
        "domain/rows.py",
        "complete (telha/storage/core/jobs",
    ),
    "submission decode (core side)": (
        "domain/submission.py",
        "Ingestor.apply_submission",
        "Ingestor.submit",
    ),
    "projection (text_worker, pool process)": ("text_worker/",),
    "worker hand-off (consumer, servicer, process pool)": (
        "telha/worker_pools.py",
        "telha/grpc/servicer.py",
        "anyio/to_process.py",
        "workers_common/handlers.py",
        "workers_common/consumer.py",
    ),
    "lease + wake-up": (
        "jobs/fair_lease.py",
        "lease (telha/storage/core/jobs",
        "JobQueue.lease",
        "JobQueue.poll",
        "JobQueue.wait",
    ),
    "enqueue transaction": ("enqueue (", "enqueue_job (", "_dedup (telha/storage/core/jobs"),
    "ingest route (request → job)": (
        "telha/rest/ingest_routes.py:8",
        "Ingestor._enqueue",
        "Ingestor.ingest",
        "telha/ingest/job_payload.py",
        "telha/auth.py",
        "telha/rest/quotas.py",
    ),
    "job status reads (the bench's polling)": ("job_status (", "job_out (", "jobs/reads.py"),
}
GENERIC: dict[str, tuple[str, ...]] = {
    "HTTP (hypercorn, h11, starlette, middleware)": (
        "hypercorn/",
        "h11/",
        "starlette/",
        "telha/rest/",
        "httptools",
    ),
    "logging": ("structlog/", "telha/logs.py", "logging/"),
    "SQLite driver (aiosqlite threads, transactions)": ("aiosqlite/", "telha/storage/sqlite/"),
    "pool process: pickling, pipes, imports": ("anyio.to_process",),
}
OTHER = "event loop, anyio, other"
#: Innermost frames that are a thread waiting, not working (py-spy, attached without
#: stopping the process, counts them): uvloop's loop in C below ``Runner.run``, and the
#: SQLite driver's thread blocked on its queue.
IDLE = ("(asyncio/runners.py:118)", "(aiosqlite/core.py:59)")

SITECUSTOMIZE = """
import os, sqlite3, threading, json, time, collections, re
_out = os.environ.get("BENCH_SQL_TRACE")
if _out:
    _out = f"{_out}.{os.getpid()}"
    _counts = collections.Counter()
    _lock = threading.Lock()
    _space = re.compile(r"\\s+")
    _real = sqlite3.connect
    def _shape(sql):
        sql = _space.sub(" ", sql.strip())
        sql = re.sub(r"\\((\\?, )+\\?\\)(, \\((\\?, )+\\?\\))*", "(?…)", sql)
        sql = re.sub(r"x'[0-9a-f]*'", "x''", sql)
        sql = re.sub(r"\\b\\d+\\b", "N", sql)
        return sql[:160]
    def _trace(sql):
        with _lock:
            _counts[(threading.current_thread().name, _shape(sql))] += 1
    def connect(*args, **kwargs):
        conn = _real(*args, **kwargs)
        conn.set_trace_callback(_trace)
        return conn
    sqlite3.connect = connect
    def _dump():
        while True:
            time.sleep(0.5)
            with _lock:
                rows = [[t, s, n] for (t, s), n in _counts.items()]
            tmp = _out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(rows, f)
            os.replace(tmp, _out)
    threading.Thread(target=_dump, name="bench-sql-trace", daemon=True).start()
"""


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Native thread id → (comm, user+system CPU seconds) of every thread of ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rpartition(")")[2].split()
        out[int(task.name)] = (comm, (int(fields[11]) + int(fields[12])) / tick)
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Native thread id → Python thread name (``py-spy dump``; threads it cannot name are
    left out)."""
    done = subprocess.run(
        [str(PY_SPY), "dump", "--pid", str(pid)], capture_output=True, text=True, check=False
    )
    names = {}
    for m in re.finditer(
        r'Thread (0x[0-9A-Fa-f]+|\d+) \((?:active|idle)[^)]*\): "([^"]*)"', done.stdout
    ):
        ident = m.group(1)
        names[int(ident, 16) if ident.startswith("0x") else int(ident)] = m.group(2)
    return names


def stage_of(stack: str) -> str:
    """The stage of one folded stack (:data:`STAGES`, then :data:`GENERIC`)."""
    frames = stack.split(";")
    for table in (STAGES, GENERIC):
        for frame in reversed(frames):
            for stage, needles in table.items():
                if any(n in frame for n in needles):
                    return stage
    return OTHER


def fold(raw: Path) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    """Samples per stage and per process (``py-spy --subprocesses``: a pool process's stacks
    start with two ``process`` frames), and the total of working (not :data:`IDLE`) samples;
    ``stages["idle"]`` counts the others."""
    stages: collections.Counter[str] = collections.Counter()
    procs: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        count = int(n)
        if stack.endswith(IDLE):
            stages["idle"] += count
            continue
        total += count
        stages[stage_of(stack)] += count
        roots = [f for f in stack.split(";") if f.startswith("process ")]
        procs["pool process" if len(roots) > 1 else "telha serve"] += count
    return stages, procs, total


async def _prewarm(url: str, key: str, n: int) -> None:
    """``n`` jobs worked before anything is measured (the process pool starts its workers)."""
    clients = [Client(url, key, 4) for _ in range(CLIENTS)]
    try:
        await wait_completed(clients, await post_jobs(clients, "prewarm", n, None))
    finally:
        for client in clients:
            await client.__aexit__()


def one_run(out: Path, jobs: int, concurrency: int, rate: int, trace: bool) -> dict[str, object]:
    """One server, driven with ``jobs`` jobs: with ``trace``, the SQL statements counted (and
    nothing else: the callback's cost would blur the profile); without, py-spy and the
    threads' CPU."""
    env = dict(os.environ)
    sql = out / "sql.json"
    if trace:
        site = out / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        os.environ["BENCH_SQL_TRACE"] = str(sql)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    local = {"in_process": ["text_worker"], "concurrency": concurrency}
    folder = Path(tempfile.mkdtemp(dir=out))
    config = write_config(folder, "sqlite", workers=local, ingest={"max_concurrent": 64})
    try:
        server = ServerProcess(config).start()
    finally:
        os.environ.clear()
        os.environ.update(env)
    got: dict[str, object] = {}
    try:
        assert server.proc is not None
        pid = server.proc.pid
        key = server.create_key("bench", "main")
        anyio.run(_prewarm, server.base_url, key, 64)  # the process pool started
        time.sleep(1.0)
        spy = None
        if trace:
            sql = out / f"sql.json.{pid}"
            got["sql_before"] = json.loads(sql.read_text()) if sql.exists() else []
        else:
            got["cpu_before"] = thread_cpu(pid)
            spy = subprocess.Popen(
                [str(PY_SPY), "record", "--pid", str(pid), "--subprocesses", "--rate",
                 str(rate), "--format", "raw", "--output", str(out / "profile.txt"),
                 "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        got["figures"] = anyio.run(drive, [server.base_url], key, jobs, None)
        got["wall"] = time.perf_counter() - t0
        got["load"] = (load0, os.getloadavg()[0])
        if trace:
            time.sleep(1.2)  # the trace file is written every 0.5 s
            got["sql_after"] = json.loads(sql.read_text())
        else:
            got["names"] = thread_names(pid)
            got["cpu_after"] = thread_cpu(pid)
            assert spy is not None
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
    finally:
        server.stop()
    return got


def _headline(what: str, got: dict[str, object], jobs: int, concurrency: int) -> None:
    rate, p50, p99 = got["figures"]  # type: ignore[misc]
    load0, load1 = got["load"]  # type: ignore[misc]
    print(f"{what}: {jobs:,} tiny text jobs (+32 warm-up), in-process SQLite, {concurrency}"
          f" consumers: {rate:,.0f} jobs/s, p50 {p50:.0f} ms, p99 {p99:.0f} ms,"
          f" {got['wall']:.1f} s; load average {load0:.1f} → {load1:.1f}")  # fmt: skip
    print()


def main() -> int:
    """Run twice (profiled, then SQL traced), print the tables."""
    parser = argparse.ArgumentParser(prog="bench/queue_profile.py")
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=2, help="in-process consumers")
    parser.add_argument("--rate", type=int, default=97, help="py-spy samples per second")
    parser.add_argument("--out", type=Path, default=None, help="keep the raw files here")
    parser.add_argument(
        "--only", choices=("cpu", "sql"), default=None, help="one of the two runs only"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="queue-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs + 32  # drive()'s own warm-up too
    if args.only != "sql":
        _profiled(out, args, jobs)
    if args.only != "cpu":
        _traced(out, args, jobs)
    return 0


def _profiled(out: Path, args: argparse.Namespace, jobs: int) -> None:
    """The py-spy run: CPU by thread, by stage, by process."""
    prof = one_run(out, args.jobs, args.concurrency, args.rate, trace=False)
    _headline("profiled run (py-spy attached)", prof, args.jobs, args.concurrency)
    print("| thread | CPU s | ms per job |")
    print("|---|---|---|")
    by_name: collections.Counter[str] = collections.Counter()
    names: dict[int, str] = prof["names"]  # type: ignore[assignment]
    before: dict[int, tuple[str, float]] = prof["cpu_before"]  # type: ignore[assignment]
    after: dict[int, tuple[str, float]] = prof["cpu_after"]  # type: ignore[assignment]
    for tid, (comm, sec) in after.items():
        name = names.get(tid, comm)
        by_name[re.sub(r"\d+", "N", name)] += sec - before.get(tid, (comm, 0.0))[1]
    for name, sec in by_name.most_common():
        if sec > 0:
            print(f"| {name} | {sec:.2f} | {sec * 1000 / jobs:.3f} |")
    whole = sum(by_name.values())
    print(f"| **server process** | {whole:.2f} | {whole * 1000 / jobs:.3f} |")
    print()
    stages, procs, total = fold(out / "profile.txt")
    per_job = whole * 1000 / jobs
    print(
        f"| stage (py-spy: {total:,} working samples at {args.rate}/s, all processes;"
        f" {stages['idle']:,} idle left out) | share | ≈ server CPU ms per job |"
    )
    print("|---|---|---|")
    for stage in [*STAGES, *GENERIC, OTHER]:
        if stages[stage]:
            share = stages[stage] / total
            print(f"| {stage} | {share:.1%} | {share * per_job:.3f} |")
    print()
    print("| process | share |")
    print("|---|---|")
    for proc, n in procs.most_common(6):
        print(f"| {proc} | {n / total:.1%} |")
    print()


def _traced(out: Path, args: argparse.Namespace, jobs: int) -> None:
    """The SQL-traced run: statements per job, by connection thread and by shape."""
    traced = one_run(out, args.jobs, args.concurrency, args.rate, trace=True)
    _headline("SQL-traced run", traced, args.jobs, args.concurrency)
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for thread, sql, n in traced["sql_after"]:  # type: ignore[attr-defined]
        counts[(thread, sql)] += n
    for thread, sql, n in traced["sql_before"]:  # type: ignore[attr-defined]
        counts[(thread, sql)] -= n
    statements = sum(counts.values())
    print(f"SQL statements: {statements:,} in the run, {statements / jobs:.1f} per job")
    print()
    by_thread: collections.Counter[str] = collections.Counter()
    for (thread, _), n in counts.items():
        by_thread[thread] += n
    print("| connection thread | statements per job |")
    print("|---|---|")
    for thread, n in by_thread.most_common():
        if n:
            print(f"| {thread} | {n / jobs:.2f} |")
    print()
    print("| per job | statement (shape) |")
    print("|---|---|")
    merged: collections.Counter[str] = collections.Counter()
    for (_, sql), n in counts.items():
        merged[sql] += n
    for sql, n in merged.most_common(60):
        if n / jobs >= 0.05:
            print(f"| {n / jobs:.2f} | `{sql[:120]}` |")


if __name__ == "__main__":
    sys.exit(main())
