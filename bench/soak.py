"""Soak: memory of ``telha serve`` over many conversions (results: bench/RESULTS.md).

10,000 mixed conversions (``--jobs``) through a real ``telha serve`` on 127.0.0.1 with the
in-process workers (text, tabular, e-mail, code, docling): markdown and text generated per job,
CSV/TSV/e-mail/code/DOCX/HTML files from the shared corpus under a new name each (so nothing
deduplicates), POSTed as JSON by 8 concurrent clients in blocks of 500 (``--block``); after each
block has finished (no job pending or leased, read from the server's SQLite file), the serve
process's resident set (``VmRSS``, MB = 10^6 bytes) is sampled. The slope is a least-squares fit
of RSS against jobs done over the samples after the warm-up (``--warmup``, 2,000 jobs), in MB
per 1,000 jobs. Target: <= 1 MB per 1,000 jobs (docling-serve's users report ~5 MB per
conversion). docling parses in child processes, which are not part of the
serve process's RSS; their RSS at each sample is shown beside it.

Bounded cache fill vs a leak: the server runs with ``TELHA_DEBUG_MEMORY=1``
(:mod:`telha.service.debug_memory`), so each sample also reads SQLite's own heap
(``sqlite3_memory_used``: mostly its page caches, capped at the writer's 16 MiB plus 8 MiB per
reader) from ``/metrics``. Those caches fill as the database grows, so the RSS rises until
they are warm; the table gives the slope of the RSS, of SQLite's heap and of the rest (RSS
minus SQLite's heap) after the warm-up, and the RSS slope once the caches are warm (from the
first sample with SQLite's heap within 5% of its largest value in the run). The verdict
uses the larger of the two RSS slopes. Measured figures: bench/RESULTS.md ("Soak").

Run: ``.venv/bin/python bench/soak.py [--jobs 10000] [--block 500] [--warmup 2000]``. Not a
timed test; exits 0 whether the target passes or not, 1 if the server failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

import argparse
import base64
import contextlib
import os
import tempfile
import time
from typing import Any

import anyio
import httpx

from telha.service.debug_memory import ENV
from tests.support.server import ServerProcess, wait_jobs_finished, write_config

CORPUS = Path(os.environ.get("TELHA_CORPUS", ROOT.parent / "shared" / "corpus"))
TARGET_MB_PER_1000 = 1.0
CLIENTS = 8
#: SQLite's heap counts as warm from the first sample within this share of its largest.
WARM_SHARE = 0.95
#: One cycle of the mix, in job formats (20 jobs).
MIX = ["markdown"] * 4 + ["text"] * 3 + ["csv"] * 3 + ["tsv"] * 2 + ["eml"] * 3 + ["code"] * 3
MIX += ["docx", "html"]
WORKERS = ["text_worker", "tabular_worker", "email_worker", "code_worker", "docling_worker"]
#: Corpus files that are meant to fail (truncated, encrypted, malformed) are left out.
_BROKEN = ("truncated", "protected", "too-many", "duplicate", "bad_")
_SUFFIX = {"code": (".py", ".rs", ".go", ".js")}


def corpus_files(fmt: str) -> list[Path]:
    """Readable corpus files of ``fmt`` (code: of every language folder)."""
    folder = CORPUS / fmt
    suffixes = _SUFFIX.get(fmt, (f".{fmt}",))
    found = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes)
    return [p for p in found if not any(b in p.name for b in _BROKEN)]


def bodies(n: int, offset: int) -> list[dict[str, Any]]:
    """Jobs ``offset .. offset + n`` of the mix, deterministic, every one a new source."""
    files = {fmt: corpus_files(fmt) for fmt in set(MIX) - {"markdown", "text"}}
    out = []
    for i in range(offset, offset + n):
        fmt = MIX[i % len(MIX)]
        if fmt == "markdown":
            raw = f"# Note {i}\n\nFirst paragraph {i}.\n\n## Part\n\n- item {i}\n".encode()
            name = f"soak/{i}.md"
        elif fmt == "text":
            raw = f"Plain text {i}.\n\nSecond paragraph of {i}.\n".encode()
            name = f"soak/{i}.txt"
        else:
            path = files[fmt][i % len(files[fmt])]
            raw, name = path.read_bytes(), f"soak/{i}/{path.name}"
        out.append({"format": fmt, "name": name, "contentBase64": base64.b64encode(raw).decode()})
    return out


def rss_mb(pid: int) -> float:
    """Resident set of ``pid`` in MB (10^6 bytes), from ``/proc``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmRSS for {pid}")


def children_rss_mb(pid: int) -> float:
    """Resident sets of ``pid``'s direct children (docling's parse processes), MB."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError, RuntimeError):  # it ended meanwhile
                total += rss_mb(int(child))
    return total


async def post_block(c: httpx.AsyncClient, block: list[dict[str, Any]]) -> None:
    limit = anyio.Semaphore(CLIENTS)

    async def post(body: dict[str, Any]) -> None:
        async with limit:
            resp = await c.post("/v1/ingest", json=body)
            if resp.status_code not in (200, 201, 202):
                raise RuntimeError(f"{body['name']}: {resp.status_code} {resp.text}")

    async with anyio.create_task_group() as tg:
        for body in block:
            tg.start_soon(post, body)


async def sqlite_heap_mb(c: httpx.AsyncClient) -> float:
    """SQLite's heap in the serve process (``telha_debug_sqlite_heap_bytes``), MB; NaN when
    the probe is not there."""
    for line in (await c.get("/metrics")).text.splitlines():
        if line.startswith("telha_debug_sqlite_heap_bytes "):
            return float(line.split()[1]) / 1e6
    return float("nan")


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of ``(jobs, MB)`` in MB per 1,000 jobs (0 with < 2 points)."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] / 1000 for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


async def soak(server: ServerProcess, key: str, args: argparse.Namespace) -> list[list[str]]:
    assert server.proc is not None
    pid = server.proc.pid
    rows: list[list[str]] = []
    samples: list[tuple[int, float, float]] = []  # jobs done, RSS MB, SQLite heap MB
    start = time.monotonic()
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=120
    ) as c:
        rows.append(["0", f"{rss_mb(pid):.1f}", f"{await sqlite_heap_mb(c):.1f}", "-", "-", "0"])
        done = 0
        while done < args.jobs:
            n = min(args.block, args.jobs - done)
            await post_block(c, bodies(n, done))
            states = await anyio.to_thread.run_sync(wait_jobs_finished, server.db, 1800, 0.05)
            done += n
            mb, heap = rss_mb(pid), await sqlite_heap_mb(c)
            samples.append((done, mb, heap))
            failed = states.get("dead", 0)
            rows.append([f"{done}", f"{mb:.1f}", f"{heap:.1f}", f"{children_rss_mb(pid):.1f}",
                         f"{failed}", f"{time.monotonic() - start:.0f}"])  # fmt: skip
    after = [p for p in samples if p[0] > args.warmup]
    top = max((p[2] for p in samples), default=float("nan"))
    warm_at = next((p[0] for p in samples if p[2] >= WARM_SHARE * top), None)
    warm = [p for p in samples if warm_at is not None and p[0] >= warm_at]
    rss_after = slope([(j, r) for j, r, _ in after])
    rows.append([f"slope after {args.warmup}", f"{rss_after:.2f} MB / 1,000 jobs", "", "", "", ""])
    heap_after = slope([(j, h) for j, _, h in after])
    rows.append(["  of it SQLite's heap", f"{heap_after:.2f}", "", "", "", ""])
    rest_after = slope([(j, r - h) for j, r, h in after])
    rows.append(["  the rest (RSS - SQLite)", f"{rest_after:.2f}", "", "", "", ""])
    fit = rss_after
    if len(warm) >= 3:
        warm_fit = slope([(j, r) for j, r, _ in warm])
        fit = max(fit, warm_fit)
        rows.append([f"slope once caches warm ({warm_at} on)", f"{warm_fit:.2f} MB / 1,000 jobs",
                     "", "", "", ""])  # fmt: skip
    else:
        rows.append(["caches warm", f"{'never' if warm_at is None else warm_at} (< 3 samples)",
                     "", "", "", ""])  # fmt: skip
    rows.append(["verdict slope", f"{fit:.2f} MB / 1,000 jobs", "", "", "", ""])
    return rows


def main() -> int:
    """Run the soak and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--block", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=2_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="telha-soak-") as tmp_name:
        config = write_config(Path(tmp_name), workers={"in_process": WORKERS})
        os.environ[ENV] = "1"  # the SQLite heap probe (ServerProcess passes the environment)
        server = ServerProcess(config).start()
        try:
            key = server.create_key("soak", "org")
            rows = anyio.run(soak, server, key, args)
        except (RuntimeError, TimeoutError) as exc:
            print(f"soak: {exc}", file=sys.stderr)
            return 1
        finally:
            server.stop()
    mix = ", ".join(sorted(set(MIX)))
    print(f"soak: {args.jobs} mixed conversions ({mix}), in-process workers, RSS after every"
          f" {args.block} jobs; slope after {args.warmup} jobs")  # fmt: skip
    print("| jobs done | serve RSS MB | SQLite heap MB | children RSS MB (docling) | dead jobs"
          " | elapsed s |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    fit = float(rows[-1][1].split()[0])
    verdict = "PASS" if fit <= TARGET_MB_PER_1000 else "FAIL"
    print(f"target: <= {TARGET_MB_PER_1000:g} MB per 1,000 jobs once warm: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
