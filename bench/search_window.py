"""Benchmark: what ``[search] rank_window`` costs and what it gives up, on a built store.

Reads a SQLite store built by ``bench/search.py --store DIR --spans N`` (a read-only
connection) and, for each of the 300 queries
``bench/search.py`` times (the same seed, so the same queries), runs in this process:

- the query ranked in full (``rank_window = 0``): its top 20 and its count of matches;
- for each window of ``--windows``: the search's own ranking statement
  (``SqliteDialect.ranked_window_sql``, ``limit`` 21 as the REST route asks)
  best of ``--repeat``, in CPU ms of this process (``time.process_time``: SQLite runs in
  it, so the figure moves less with other work on the machine than the wall clock) and
  wall ms; and its top 20 against the full ranking's: the share of the full top 20 it holds
  (overlap) and whether it is the same list in the same order.

Run: ``.venv/bin/python bench/search_window.py --store DIR --spans N`` (generating the
queries replays the bench's corpus: about a minute for 1,000,000 spans). Prints one line a
window; ``--json FILE`` also writes every query's figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import json
import random
import sqlite3
import statistics
import time
from typing import Any

from bench.search import SEED, paragraphs, pct, queries, vocabulary
from telha.domain.search_query import fts5_query, parse_query, scope_rowids
from telha.storage.sqlite.dialect import SQLITE

TOP = 20


def bench_queries(spans: int) -> list[str]:
    """The queries ``bench/search.py`` times for a store of ``spans`` (its rng replayed)."""
    rng = random.Random(SEED)
    words = vocabulary(rng)
    paragraphs(rng, words, spans)
    return queries(rng, words)


def statements() -> tuple[str, str]:
    """The fully ranked statement and the windowed one, as the search builds them (no
    filter, no stale rows)."""
    windowed = SQLITE.ranked_window_sql([])
    assert windowed is not None
    return SQLITE.search_sql([], ranked=True), windowed


def measure(
    conn: sqlite3.Connection, sql: str, args: tuple[Any, ...], repeat: int
) -> dict[str, Any]:
    """Top rowids, least CPU ms and its wall ms over ``repeat`` runs of ``sql``."""
    best: dict[str, Any] = {}
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        top = [r[0] for r in conn.execute(sql, args)]
        cpu, wall = (time.process_time() - c0) * 1e3, (time.perf_counter() - w0) * 1e3
        if not best or cpu < best["cpu"]:
            best = {"top": top[:TOP], "cpu": cpu, "wall": wall}
    return best


def report(qs: list[str], per: dict[str, Any], windows: list[int]) -> None:
    """One line a window, over the 300 queries as the bench sends them (repeats included)."""
    rows = [per[q] for q in qs]
    full_cpu = [r["full"]["cpu"] for r in rows]
    print(f"{len(qs)} queries; full ranking CPU p50 / p99 {pct(full_cpu, 0.5):.1f} / "
          f"{pct(full_cpu, 0.99):.1f} ms")  # fmt: skip
    print("| window | queries over it | CPU p50 / p99 ms | wall p50 / p99 ms | same top 20 |"
          " mean overlap (over it) |")  # fmt: skip
    for w in windows:
        cpu = [r[str(w)]["cpu"] for r in rows]
        wall = [r[str(w)]["wall"] for r in rows]
        same = sum(r[str(w)]["top"] == r["full"]["top"] for r in rows)
        over = [r for r in rows if r["matches"] > w]
        overlap = [len(set(r[str(w)]["top"]) & set(r["full"]["top"])) / TOP for r in over]
        print(
            f"| {w:,} | {len(over)} | {pct(cpu, 0.5):.1f} / {pct(cpu, 0.99):.1f}"
            f" | {pct(wall, 0.5):.1f} / {pct(wall, 0.99):.1f} | {same} / {len(qs)}"
            f" | {statistics.mean(overlap) if overlap else 1.0:.2f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--spans", type=int, required=True)
    parser.add_argument("--windows", default="50000,20000,10000,5000,2000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    qs = bench_queries(args.spans)
    db = args.store / "telha.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    lo, hi = scope_rowids(1)  # the bench's only scope
    full_sql, window_sql = statements()
    count = (
        "SELECT count(*) FROM search_fts f WHERE search_fts MATCH ? AND f.rowid >= ?"
        " AND f.rowid < ?"
    )
    per: dict[str, Any] = {}
    for q in qs:
        m = fts5_query(parse_query(q))
        rec = {"matches": conn.execute(count, (m, lo, hi)).fetchone()[0]}
        rec["full"] = measure(conn, full_sql, (m, lo, hi, TOP + 1, 0), 1)
        for w in windows:
            rec[str(w)] = measure(conn, window_sql, (m, lo, hi, w, 0, TOP + 1, 0), args.repeat)
        per[q] = rec
    conn.close()
    report(qs, per, windows)
    if args.json is not None:
        args.json.write_text(json.dumps(per))
    return 0


if __name__ == "__main__":
    sys.exit(main())
