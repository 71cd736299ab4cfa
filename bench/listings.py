"""Benchmark: the listings (``GET /v1/sources``, ``GET /v1/ingest``) over a scope of
100,000 sources and 100,000 jobs, on a real ``telha serve`` subprocess on 127.0.0.1 (SQLite).

The store is made by ``telha serve`` itself (migrations, the scope and its API key), then
stopped and filled directly with SQL in one transaction: ``--rows`` sources in the
``sources`` table (states 70 % current, 10 % retired, 5 % erased, 15 % pending; formats and
four name folders mixed; one change a millisecond apart) and as many jobs (one per source,
80 % completed, 10 % pending, 5 % leased, 5 % dead; one in ten a child of an earlier job) —
the rows the write paths keep (docs/rest-api.md, "Listings"). The server is started again
and each listing is requested ``--requests`` times, one after another on one keep-alive
connection, after ``--warmup`` requests: the first page of 100 with each filter, and a page
deep in the listing (its cursor found by walking pages of 1,000 halfway through). Each
request is timed client-side, from sending to the whole JSON body read.

Target: p50 <= 20 ms for a page of 100 out of 100,000 (``--rows``), every filter included:
``docs/`` is a common prefix (a quarter of the scope: the listing's order is walked),
``docs/00010`` a rare one (three names: read by name and sorted).

Run: ``.venv/bin/python bench/listings.py [--rows 100000] [--requests 200]``. Exits 0
whether the targets pass or not; 1 if a request fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds queue.py: drop bench/ (sys.path[0]) so ``import queue`` finds the stdlib.
ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

import argparse
import os
import random
import sqlite3
import statistics
import tempfile
import time
from typing import Any

import httpx
from uuid_utils import uuid7

from telha.domain.ids import source_id_for
from tests.support.server import ServerProcess, write_config

TARGET_P50_MS = 20.0
SEED = 20261201
FORMATS = ("pdf", "docx", "csv", "text", "markdown", "eml", "html", "xlsx")
FOLDERS = ("docs", "mail", "data", "web")


def _pick(rng: random.Random, table: tuple[tuple[str, int], ...]) -> str:
    """A value of ``table`` (``(value, percent)`` pairs adding to 100)."""
    roll = rng.randrange(100)
    for value, pct in table:
        if roll < pct:
            return value
        roll -= pct
    return table[-1][0]


def populate(db: Path, tenant: str, rows: int) -> None:
    """``rows`` sources and ``rows`` jobs of ``tenant``'s scope, one transaction."""
    rng = random.Random(SEED)
    conn = sqlite3.connect(db)
    (sid,) = conn.execute("SELECT scope_id FROM scopes WHERE tenant_id = ?", (tenant,)).fetchone()
    base = 1_790_000_000_000_000
    jobs: list[tuple[Any, ...]] = []
    sources: list[tuple[Any, ...]] = []
    job_ids: list[bytes] = []
    for i in range(rows):
        fmt = rng.choice(FORMATS)
        name = f"{FOLDERS[i % len(FOLDERS)]}/{i:06d}.{fmt}"
        source = source_id_for(name).bytes
        job_id = uuid7().bytes
        created = base + i * 1_000
        state = _pick(rng, (("completed", 80), ("pending", 10), ("leased", 5), ("dead", 5)))
        parent = rng.choice(job_ids[-1000:]) if job_ids and rng.randrange(10) == 0 else None
        failure = "corrupt_input: generated" if state == "dead" else None
        jobs.append((job_id, sid, f"ingest:{fmt}", fmt, source, None, b"{}", state,
                     1 if state == "dead" else 0, created, failure, created, created + 500,
                     name, parent))  # fmt: skip
        job_ids.append(job_id)
        src_state = _pick(rng, (("current", 70), ("retired", 10), ("erased", 5), ("pending", 15)))
        versions = 0 if src_state == "pending" else rng.randint(1, 3)
        latest = created + 400 if versions else None
        sources.append((sid, source, name, fmt, src_state, latest, versions, job_id,
                        created + 500))  # fmt: skip
    with conn:
        conn.executemany(
            "INSERT INTO jobs (job_id, scope_id, kind, format, source_id, content_hash,"
            " payload, state, attempts, available_at, failure_reason, created_at, updated_at,"
            " name, parent_job_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            jobs,
        )
        conn.executemany(
            "INSERT INTO sources (scope_id, source_id, name, format, state, latest_tx,"
            " version_count, last_job_id, changed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            sources,
        )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _deep_cursor(c: httpx.Client, url: str, rows: int) -> str:
    """The cursor halfway through a listing, walked in pages of 1,000."""
    cursor = None
    for _ in range(max(1, rows // 2000)):
        params: dict[str, Any] = {"limit": 1000}
        if cursor:
            params["cursor"] = cursor
        page = c.get(url, params=params)
        page.raise_for_status()
        cursor = page.json()["nextCursor"]
        assert cursor, f"{url} ended before the middle"
    assert cursor is not None
    return cursor


def time_case(
    c: httpx.Client, url: str, params: dict[str, Any], key: str, warmup: int, n: int
) -> tuple[int, list[float]]:
    """How many rows (``key``) the page held, and each request's ms."""
    for _ in range(warmup):
        c.get(url, params=params).raise_for_status()
    times = []
    count = 0
    for _ in range(n):
        t0 = time.perf_counter()
        resp = c.get(url, params=params)
        body = resp.json()
        times.append((time.perf_counter() - t0) * 1000)
        if resp.status_code != 200:
            raise SystemExit(f"{url} {params}: {resp.status_code} {resp.text[:200]}")
        count = len(body[key])
    return count, times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="sources, and jobs")
    ap.add_argument("--requests", type=int, default=200, help="timed requests per case")
    ap.add_argument("--warmup", type=int, default=20, help="untimed requests per case first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = write_config(folder, workers={"in_process": []})
        with ServerProcess(config) as srv:
            key = srv.create_key("bench", "org")
            assert srv.stop() == 0, srv.log_text()
        t0 = time.perf_counter()
        populate(folder / "telha.db", "bench", args.rows)
        print(f"populated {args.rows:,} sources and {args.rows:,} jobs"
              f" in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        with ServerProcess(config) as srv:
            with httpx.Client(base_url=srv.base_url, headers={"x-api-key": key}) as c:
                c.get("/v1/sources", params={"limit": 1}).raise_for_status()
                deep_sources = _deep_cursor(c, "/v1/sources", args.rows)
                deep_jobs = _deep_cursor(c, "/v1/ingest", args.rows)
                parent = c.get("/v1/ingest", params={"limit": 1000}).json()["jobs"]
                parent_id = next(j["parentJobId"] for j in parent if j["parentJobId"])
                source_id = parent[0]["sourceId"]
                cases: list[tuple[str, str, dict[str, Any], str, bool]] = [
                    ("sources", "/v1/sources", {}, "sources", True),
                    ("sources, halfway (cursor)", "/v1/sources", {"cursor": deep_sources},
                     "sources", True),
                    ("sources state=pending", "/v1/sources", {"state": "pending"}, "sources",
                     True),
                    ("sources state=erased", "/v1/sources", {"state": "erased"}, "sources",
                     True),
                    ("sources format=pdf", "/v1/sources", {"format": "pdf"}, "sources", True),
                    ("sources prefix=docs/", "/v1/sources", {"prefix": "docs/"}, "sources",
                     True),
                    ("sources prefix=docs/00010", "/v1/sources", {"prefix": "docs/00010"},
                     "sources", True),
                    ("jobs", "/v1/ingest", {}, "jobs", True),
                    ("jobs, halfway (cursor)", "/v1/ingest", {"cursor": deep_jobs}, "jobs",
                     True),
                    ("jobs state=dead", "/v1/ingest", {"state": "dead"}, "jobs", True),
                    ("jobs kind=ingest:csv", "/v1/ingest", {"kind": "ingest:csv"}, "jobs",
                     True),
                    ("jobs sourceId=…", "/v1/ingest", {"sourceId": source_id}, "jobs", True),
                    ("jobs parent=…", "/v1/ingest", {"parent": parent_id}, "jobs", True),
                ]  # fmt: skip
                results = []
                for label, url, params, key_, targeted in cases:
                    rows, times = time_case(c, url, params, key_, args.warmup, args.requests)
                    results.append((label, rows, times, targeted))
            assert srv.stop() == 0, srv.log_text()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nlistings, {args.rows:,} sources and {args.rows:,} jobs in one scope, SQLite;"
          f" {args.requests} requests a case, one connection, client-side;"
          f" load average {load} on {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'case':<28} {'rows':>5} {'p50 ms':>8} {'p95 ms':>8} {'target p50':>11}  result")
    for label, rows, times, targeted in results:
        p50 = statistics.median(times)
        p95 = statistics.quantiles(times, n=20)[18]
        target = f"<= {TARGET_P50_MS:.0f} ms" if targeted else "-"
        verdict = ("PASS" if p50 <= TARGET_P50_MS else "FAIL") if targeted else ""
        print(f"{label:<28} {rows:>5} {p50:>8.2f} {p95:>8.2f} {target:>11}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
