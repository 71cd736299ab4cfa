"""Benchmark: each of PostgreSQL's three fast paths against the general path it copies, at
the store (no HTTP, no workers): the time per enqueue, lease and single-shot commit of a
small text version, on a fresh database per mode, the modes alternated over rounds.

What it answers: whether a fast path (``telha/storage/postgres/functions.sql``) still earns
its place (docs/architecture.md, "The storage seam": kept where it is at least 1.5× the
general path). The end-to-end figure is ``bench/queue.py --engine postgres``.

Run: ``.venv/bin/python bench/pg_fast_paths.py [--jobs 500] [--rounds 3]`` with
``TELHA_TEST_PG_DSN`` or the cluster of ``scripts/pg-test-server``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import anyio

# bench/ holds queue.py: drop it (sys.path[0]) so ``import queue`` finds the stdlib.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from telha.domain.ids import content_hash
from telha.domain.model import Dedup, JobCompletion, LeaseRef, NewJob, NewVersion, Scope
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.storage.jobs.aggregate import Jobs
from telha.storage.postgres import PostgresStore
from telha.storage.versions.aggregate import Versions
from tests.support.pg import create_database, drop_databases

SCOPE = Scope("bench", "o")
LEASE_US = 60_000_000


def _proj(n: int) -> Projection:
    text = f"a small text version number {n}\n".encode()
    return Projection(
        text,
        [SpanOut(0, len(text), "body"), SpanOut(0, 1, "head")],
        [NodeOut(("DOCUMENT",), b"{}", (0,)), NodeOut(("PART",), b'{"k":1}', (0, 1))],
        [EdgeOut("HAS", 0, 1)],
    )


async def one_mode(jobs: int, fast: bool) -> dict[str, float]:
    """Per-operation medians (µs) of ``jobs`` enqueues, leases and commits."""
    store = PostgresStore(create_database(), pool_size=2)
    await store.open()
    took: dict[str, list[float]] = {"enqueue": [], "lease": [], "commit": []}
    # The fast paths (FastJobs, FastVersions) or the general paths over the same store.
    job_ops = store.jobs if fast else Jobs(store)
    version_ops = store.versions if fast else Versions(store)
    try:
        now = 1_000_000_000_000
        sources = [n.to_bytes(4, "big") * 4 for n in range(jobs)]
        for n, source in enumerate(sources):
            job = NewJob(
                (n + 1).to_bytes(16, "big"), "ingest:text", "text", source,
                content_hash(b"raw %d" % n), b'{"name":"a.txt"}', name=f"a{n}.txt",
            )  # fmt: skip
            t0 = time.perf_counter()
            await job_ops.enqueue(SCOPE, job, now_us=now, dedup=True)
            took["enqueue"].append(time.perf_counter() - t0)
        leased = []
        for _ in sources:
            t0 = time.perf_counter()
            got = await job_ops.lease_next(
                ["text"], scope=None, worker_id="w", now_us=now, lease_us=LEASE_US
            )
            took["lease"].append(time.perf_counter() - t0)
            assert got is not None
            leased.append(got)
        for n, job in enumerate(leased):
            proj = _proj(n)
            version = NewVersion(
                job.source_id, "a.txt", "text", job.content_hash or b"", 10, "w", job.job_id
            )
            done = JobCompletion(LeaseRef(job.job_id, job.lease_generation), now, b"{}", (), "w")
            t0 = time.perf_counter()
            await version_ops.commit(SCOPE, version, proj, dedup=Dedup.SUBMIT, completion=done)
            took["commit"].append(time.perf_counter() - t0)
    finally:
        await store.close()
    return {op: statistics.median(v) * 1e6 for op, v in took.items()}


async def main(jobs: int, rounds: int) -> None:
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    try:
        for r in range(rounds):
            for fast in (True, False) if r % 2 == 0 else (False, True):
                results[fast].append(await one_mode(jobs, fast))
    finally:
        drop_databases()
    print(f"pg_fast_paths: {jobs} jobs per mode, {rounds} rounds alternated; medians, µs/op")
    print("| operation | fast path µs | general path µs | general / fast |")
    print("|---|---|---|---|")
    for op in ("enqueue", "lease", "commit"):
        f = statistics.median(r[op] for r in results[True])
        g = statistics.median(r[op] for r in results[False])
        print(f"| {op} | {f:,.0f} | {g:,.0f} | {g / f:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="bench/pg_fast_paths.py")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    anyio.run(main, args.jobs, args.rounds)
