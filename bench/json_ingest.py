"""Benchmark: a 10,000-record ``format=json`` batch through ``POST /v1/ingest`` vs. a floor.

End to end: a real ``telha serve`` subprocess on 127.0.0.1, one request per batch (each
repetition sends different bytes under a different name, so nothing is deduplicated).

Floor, measured in the same run on the same batch bytes: ``msgspec.json.decode`` + BLAKE3 +
building the rows with msgspec + ONE ``executemany`` transaction writing the same rows into the
same schema (a fresh SQLite file migrated by :class:`SqliteStore`, WAL, synchronous=NORMAL).
Node ids are fresh uuid7s, as the server's are: fully random 16-byte keys would scatter the
``WITHOUT ROWID`` B-tree inserts and roughly double the floor's insert time.

The same batches are also sent to a server with ``[search] enabled = false``: the overhead of
keeping the full-text index (target ≤ 15 %). Servers with and without the index alternate,
``--rounds`` times each (fresh data folders), the one that goes first switching every round,
and the medians over every round are compared: one server run's median moves by ±20 % on a
shared 2-core machine. Dirty pages are written out (``sync``) after each server stops, so a
run does not pay for the writeback of the one before it (that made whichever server ran
second 10–20 % slower). ``--search on|off`` runs only that path (``bench/versions.py`` uses
``off``: one server per run, like the checkout from before the index).

Run: ``.venv/bin/python bench/json_ingest.py [--rounds N] [--search both|on|off]``. Exits 0
whether the targets pass or not; non-zero only if a request fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds queue.py: replace it (sys.path[0]) with the repo root so ``import queue`` is
# the stdlib's and ``telha``/``tests`` import from the checkout.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import os
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from typing import Any

import blake3
import httpx
import msgspec
from uuid_utils import uuid7

from telha.domain.model import BLOB_CHUNK
from tests.support.floor import floor_db
from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_search_indexed

RECORDS = 10_000
REPS = 7
#: Server runs per path (search on, search off), alternated.
ROUNDS = 3
SEED = 20260701
TARGET_RPS = 40_000
TARGET_RATIO = 3.0
#: Most the full-text index may slow the ingest down (``[search] enabled`` vs. disabled).
SEARCH_OVERHEAD = 0.15
CITIES = ["Lisboa", "São Paulo", "Zürich", "Kraków", "東京", "Reykjavík", "Oslo", "Nairobi"]
WORDS = ["alpha", "beta", "gamma", "delta", "épsilon", "ζeta", "theta", "kappa", "naïve", "omega"]
_encode = msgspec.json.encode


def make_batch(rep: int) -> bytes:
    """The JSON text (UTF-8 bytes) of batch ``rep``: deterministic, different for every ``rep``."""
    rng = random.Random(SEED + rep)
    records = [
        {
            "id": rep * RECORDS + i,
            "title": " ".join(rng.choices(WORDS, k=3)),
            "severity": rng.randint(0, 10),
            "score": round(rng.uniform(0, 1000), 3),
            "ratio": rng.random(),
            "open": rng.random() < 0.5,
            "owner": None if rng.random() < 0.3 else f"user{rng.randint(1, 999)}",
            "tags": rng.sample(WORDS, k=rng.randint(1, 4)),
            "status": rng.choice(["open", "closed", "pending"]),
            "note": rng.choice(["ok", "ação pendente", "à revoir", "—", ""]),
            "address": {"city": rng.choice(CITIES), "zip": f"{rng.randint(0, 99999):05d}"},
        }
        for i in range(RECORDS)
    ]
    return _encode(records)


def run_end_to_end(
    batches: list[bytes], tmp: Path, *, search: bool = True
) -> tuple[list[float], float]:
    """Median-ready wall times (s) of one POST per measured batch against a real server
    (``search``: with ``[search] enabled``, the full-text index kept), and the seconds from
    the last answer until the search indexer had written every batch (0 without search)."""
    ingest = {"max_body_bytes": 64 * 1024 * 1024, "json_max_records": RECORDS}
    folder = Path(tempfile.mkdtemp(prefix="search-on-" if search else "search-off-", dir=tmp))
    server = ServerProcess(write_config(folder, ingest=ingest, search={"enabled": search}))
    server.start()
    try:
        headers = {
            "x-api-key": server.create_key("bench", "main"),
            "content-type": "application/json",
        }
        bodies = [
            _encode({"format": "json", "name": f"bench-{i}.json", "content": b.decode()})
            for i, b in enumerate(batches)
        ]
        times = []
        with httpx.Client(base_url=server.base_url, timeout=300.0) as client:
            for i, body in enumerate(bodies):
                t0 = time.perf_counter()
                resp = client.post("/v1/ingest", content=body, headers=headers)
                elapsed = time.perf_counter() - t0
                if resp.status_code != 201:
                    raise RuntimeError(f"POST {i}: {resp.status_code} {resp.text[:2000]}")
                if len(resp.json()["nodeIds"]) != RECORDS:
                    raise RuntimeError(f"POST {i}: expected {RECORDS} nodes")
                if i > 0:  # batch 0 is the warm-up
                    times.append(elapsed)
            drain = wait_search_indexed(client) if search else 0.0
        return times, drain
    finally:
        code = server.stop()
        os.sync()  # this run's writeback is not the next run's cost
        if code != 0:
            print(f"warning: telha serve exited {code}", file=sys.stderr)


def _flatten(rec: dict[str, Any]) -> dict[str, Any]:
    """The record with its one nested object flattened to dotted keys (what ``flatten`` does)."""
    out = {}
    for k, v in rec.items():
        if type(v) is dict:
            out.update({f"{k}.{ck}": cv for ck, cv in v.items()})
        else:
            out[k] = v
    return out


def floor_once(conn: sqlite3.Connection, raw: bytes, tx: int) -> float:
    """Decode + BLAKE3 + row building + one transaction of the same rows; wall time in s."""
    t0 = time.perf_counter()
    records = msgspec.json.decode(raw)
    digest = blake3.blake3(raw).digest()
    source_id = digest[:16]
    ids = b"".join(uuid7().bytes for _ in records)  # time-ordered, like telha.domain.ids.new_id
    sid = str(uuid.UUID(bytes=source_id))
    lines, nodes, labels, spans = [], [], [], []
    offset = 0
    for i, rec in enumerate(records):
        line = _encode(rec)
        lines.append(line)
        end = offset + len(line)
        nid = ids[16 * i : 16 * i + 16]
        prov = _encode([[sid, tx, offset, end]])
        nodes.append((1, nid, tx, '["BENCH"]', _encode(_flatten(rec)), prov, source_id))
        labels.append((1, "BENCH", nid, tx))
        spans.append((1, source_id, tx, offset, end, "body", nid))
        offset = end + 1
    text = b"\n".join(lines)
    blob_id = blake3.blake3(text).digest()[:16]
    chunks = [
        (1, blob_id, i // BLOB_CHUNK, text[i : i + BLOB_CHUNK])
        for i in range(0, len(text), BLOB_CHUNK)
    ]
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO source_versions (scope_id, source_id, tx, name, format, content_hash,"
        " canonical_text_hash, size, blob_id, text_len)"
        " VALUES (1, ?, ?, 'b.json', 'json', ?, ?, ?, ?, ?)",
        (source_id, tx, digest, digest, len(raw), blob_id, len(text)),
    )
    conn.executemany("INSERT INTO blob_chunks VALUES (?, ?, ?, ?)", chunks)
    conn.executemany(
        "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
        " source_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
        nodes,
    )
    conn.executemany("INSERT INTO node_labels VALUES (?, ?, ?, ?)", labels)
    conn.executemany(
        'INSERT INTO span_rows (scope_id, source_id, source_version_tx, start, "end", kind,'
        " linked_nodes) VALUES (?, ?, ?, ?, ?, ?, ?)",
        spans,
    )
    conn.execute("COMMIT")
    return time.perf_counter() - t0


def run_floor(batches: list[bytes], tmp: Path) -> list[float]:
    """Floor wall times (s) for each measured batch (batch 0 is the warm-up)."""
    conn = floor_db(tmp / "floor.db")
    try:
        times = [floor_once(conn, raw, tx=1_000 + i) for i, raw in enumerate(batches)]
    finally:
        conn.close()
    return times[1:]


def main() -> int:
    """Generate the batches, run both paths, print the table; 1 if a request failed."""
    parser = argparse.ArgumentParser(prog="bench/json_ingest.py")
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help="alternated server runs with and without search"
    )
    parser.add_argument(
        "--search",
        choices=("both", "on", "off"),
        default="both",
        help="server runs with the full-text index, without it, or both (alternated)",
    )
    args = parser.parse_args()
    paths = [True, False] if args.search == "both" else [args.search == "on"]
    batches = [make_batch(rep) for rep in range(REPS + 1)]
    on: list[float] = []
    off: list[float] = []
    drains: list[float] = []
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name:
        tmp = Path(tmp_name)
        floor = statistics.median(run_floor(batches, tmp))
        os.sync()
        try:
            for r in range(args.rounds):
                for search in paths if r % 2 == 0 else paths[::-1]:
                    times, drain = run_end_to_end(batches, tmp, search=search)
                    (on if search else off).extend(times)
                    if search:
                        drains.append(drain)
        except (RuntimeError, httpx.HTTPError) as exc:
            print(f"json_ingest: request failed: {exc}", file=sys.stderr)
            return 1
    size = statistics.median(len(b) for b in batches) / 1e6
    runs = "with and without search alternating" if len(paths) == 2 else f"search {args.search}"
    print(
        f"json_ingest: {RECORDS:,} records/batch (~{size:.1f} MB), median of {REPS} batches"
        f" x {args.rounds} server runs per path ({runs})"
    )
    print("| path                          | median ms | records/s |")
    print("|-------------------------------|-----------|-----------|")
    e2e = statistics.median(on or off)  # the index's path when it ran
    if on:
        print(f"| end to end (REST → SQLite)    | {e2e * 1e3:9.1f} | {RECORDS / e2e:9,.0f} |")
    print(f"| floor (decode+BLAKE3+insert)  | {floor * 1e3:9.1f} | {RECORDS / floor:9,.0f} |")
    if off:
        bare = statistics.median(off)
        print(f"| end to end, search disabled   | {bare * 1e3:9.1f} | {RECORDS / bare:9,.0f} |")
    if on and off:
        overhead = e2e / bare - 1
        print(f"search index overhead: {overhead:+.1%}   (target <= +{SEARCH_OVERHEAD:.0%})")
        whole = (sum(on) + sum(drains)) / sum(off) - 1
        print(
            f"index written {statistics.median(drains) * 1e3:.0f} ms (median) after the last"
            f" answer; all {REPS} batches until indexed vs. without the index: {whole:+.1%}"
        )
    ratio = e2e / floor
    print(f"ratio end-to-end / floor: {ratio:.2f}   (target <= {TARGET_RATIO:g})")
    verdict = "PASS" if RECORDS / e2e >= TARGET_RPS else "FAIL"
    print(f"target end to end >= {TARGET_RPS:,} records/s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
