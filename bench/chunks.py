"""Benchmark: retrieval chunks of a 1,000-page document
(``GET /v1/sources/{id}/versions/{tx}/chunks``, docs/rest-api.md "Chunks"), on a real
``telha serve`` subprocess on 127.0.0.1, on SQLite and on PostgreSQL.

The document is generated markdown the size of a 1,000-page text PDF: ``--pages`` pages
of a level-2 heading every 10 pages, a level-1 heading every 100, and 6 paragraphs of
400–600 bytes a page (about 3 MB of canonical text, 6,000 PARAGRAPH spans; some é, CJK and
an emoji in each page). It goes in through the normal ingest path (``POST /v1/ingest``,
``text_worker`` in-process). Then, one request after another on one keep-alive connection,
client-side, after ``--warmup`` untimed rounds:

- **all chunks, cold**: every chunk, page after page of ``limit=1000``, with a
  ``maxBytes`` not asked for before (2048 + round): the first page reads the version's
  text, spans and nodes and cuts it, the second comes from the REST front's cache of cuts;
- **all chunks**: the same with ``maxBytes=2048`` every round (after the warm-up, cut
  already: reading the cache, encoding and sending the JSON);
- **all chunks, units=utf16**: the same, offsets converted;
- **first page**: the first 100 chunks (the default page).

Target: all chunks of the 1,000-page document <= 300 ms (median of ``--rounds``), cold and
cut already.

Run: ``.venv/bin/python bench/chunks.py [--pages 1000] [--rounds 10] [--engine sqlite]``.
Exits 0 whether the target passes or not; 1 if a request fails.
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
import statistics
import tempfile
import time
from typing import Any

import httpx

from tests.support.pg import require_engine
from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_job_blocking

TARGET_MS = 300.0
_WORDS = ["alpha", "beta", "gamma", "delta", "café", "東京", "naïve", "résumé", "data",
          "chunk", "span", "byte", "😀"]  # fmt: skip


def document(pages: int, seed: int = 7) -> str:
    """The generated markdown (module docstring), deterministic for ``seed``."""
    rnd = random.Random(seed)
    parts = []
    for page in range(pages):
        if page % 100 == 0:
            parts.append(f"# Part {page // 100 + 1}")
        if page % 10 == 0:
            parts.append(f"## Chapter {page // 10 + 1}")
        for _ in range(6):
            words: list[str] = []
            while len(" ".join(words).encode()) < rnd.randint(400, 600):
                words.append(rnd.choice(_WORDS))
            parts.append(" ".join(words).capitalize() + ".")
    return "\n\n".join(parts) + "\n"


def all_chunks(c: httpx.Client, url: str, params: dict[str, Any]) -> int:
    """Every chunk, page by page; how many."""
    n, cursor = 0, None
    while True:
        resp = c.get(url, params={**params, **({"cursor": cursor} if cursor else {})})
        resp.raise_for_status()
        page = resp.json()
        n += len(page["chunks"])
        cursor = page["nextCursor"]
        if cursor is None:
            return n


def run(engine: str, pages: int, rounds: int, warmup: int) -> list[tuple[str, int, list[float]]]:
    """The timed cases on ``engine``: ``(case, chunks, times in ms)``."""
    text = document(pages)
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(
            Path(tmp), engine, workers={"in_process": ["text_worker"], "concurrency": 1}
        )
        with ServerProcess(config) as srv:
            key = srv.create_key("bench", "org")
            with httpx.Client(base_url=srv.base_url, headers={"x-api-key": key}, timeout=120) as c:
                body = {"format": "markdown", "name": "book.md", "content": text}
                made = c.post("/v1/ingest", json=body)
                made.raise_for_status()
                job = wait_job_blocking(c, made.json()["jobId"], within_s=600)
                assert job["state"] == "completed", job
                source = made.json()["sourceId"]
                tx = c.get(f"/v1/sources/{source}").json()["versions"][0]["sourceVersionTx"]
                url = f"/v1/sources/{source}/versions/{tx}/chunks"
                cases = [
                    ("all chunks, cold", {"limit": 1000}, True),
                    ("all chunks", {"maxBytes": 2048, "limit": 1000}, True),
                    ("all chunks, units=utf16", {"maxBytes": 2048, "limit": 1000,
                                                 "units": "utf16"}, True),
                    ("first page (100)", {"maxBytes": 2048}, False),
                ]  # fmt: skip
                out = []
                for label, fixed, whole in cases:
                    times = []
                    count = 0
                    for i in range(warmup + rounds):
                        params = fixed
                        if "maxBytes" not in params:  # a new cut every round: no cache
                            params = {**params, "maxBytes": 2048 + i}
                        t0 = time.perf_counter()
                        if whole:
                            count = all_chunks(c, url, params)
                        else:
                            resp = c.get(url, params=params)
                            resp.raise_for_status()
                            count = len(resp.json()["chunks"])
                        if i >= warmup:
                            times.append((time.perf_counter() - t0) * 1000)
                    out.append((label, count, times))
            assert srv.stop() == 0, srv.log_text()
    print(f"{engine}: {len(text.encode()):,} bytes of canonical text, {pages} pages")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=10, help="timed rounds per case")
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds per case first")
    ap.add_argument("--engine", choices=["sqlite", "postgres", "both"], default="both")
    args = ap.parse_args()
    engines = ["sqlite", "postgres"] if args.engine == "both" else [args.engine]
    results = []
    for engine in engines:
        require_engine(engine)
        for label, count, times in run(engine, args.pages, args.rounds, args.warmup):
            results.append((engine, label, count, times))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nchunks of a {args.pages}-page document, maxBytes=2048; {args.rounds} rounds a"
          f" case, client-side; load average {load} on {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'engine':<9} {'case':<26} {'chunks':>6} {'p50 ms':>8} {'max ms':>8}  target")
    for engine, label, count, times in results:
        p50 = statistics.median(times)
        target = ""
        if label.startswith("all chunks") and "units" not in label:
            target = f"<= {TARGET_MS:.0f} ms " + ("PASS" if p50 <= TARGET_MS else "FAIL")
        print(f"{engine:<9} {label:<26} {count:>6} {p50:>8.1f} {max(times):>8.1f}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
