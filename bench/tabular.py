"""Benchmark: a 100 MB CSV and a 30 MB XLSX through the multipart upload and the tabular worker.

End to end: a real ``telha serve`` subprocess on 127.0.0.1; the file is POSTed as
``multipart/form-data`` (streamed from disk by httpx), the job is polled until it completes.
Timed from the start of the upload to ``completed``. Run twice per file: with the worker
in-process (inside ``telha serve``) and as a remote ``python -m workers_common.run
tabular_worker`` process over gRPC. Peak RSS is each process's ``VmHWM`` (Linux).

Floor, measured in the same run on the same file: polars parses it (``scan_csv().
collect_batches()``; calamine for XLSX), each row's cells become one JSON properties object
(``struct.json_encode``), and ONE ``executemany`` transaction writes one ``nodes`` row per data
row into the same schema (a fresh SQLite file migrated by :class:`SqliteStore`, WAL,
synchronous=NORMAL). It does none of Telha's other work (canonical text, spans, edges, labels,
the upload and the stored raw bytes), so the ratio is what all that costs.

``--search-overhead ROUNDS`` instead runs only the CSV in-process, with ``[search] enabled``
and disabled, alternating: the full-text index's cost (target at most 15 %; the index is
written after the job completes, so the time until it is written is printed beside).

Run: ``.venv/bin/python bench/tabular.py [--csv-mb 100] [--xlsx-mb 30]``. Generated files live
in a temporary folder and are removed. Exits 0 whether targets pass or not; 1 if a job fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds queue.py: replace it (sys.path[0]) with the repo root so ``import queue`` is
# the stdlib's and ``telha``/``tests`` import from the checkout.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass

import httpx
import polars as pl
import xlsxwriter
from uuid_utils import uuid7

from telha.domain.ids import source_id_for
from telha.domain.model import Scope
from tests.support.floor import floor_db
from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_search_indexed

SEED = 20261129
TARGET_ROWS_S = 50_000
TARGET_RSS_MB = 400
TARGET_RATIO = 4.0
#: Most the full-text index may slow the ingest down (``--search-overhead``).
SEARCH_OVERHEAD = 0.15
WORDS = ["alpha", "beta", "gamma", "delta", "épsilon", "ζeta", "theta", "kappa", "naïve", "omega"]
CATEGORIES = ["north", "south", "east", "west", "centre"]
HEADER = ["id", "name", "amount", "active", "day", "stamp", "category", "note"]


def _row(rng: random.Random, i: int) -> list[object]:
    return [
        i,
        " ".join(rng.choices(WORDS, k=2)),
        round(rng.uniform(-1000, 100_000), 2),
        rng.random() < 0.5,
        f"20{rng.randint(10, 29)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
        f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        rng.choice(CATEGORIES),
        " ".join(rng.choices(WORDS, k=rng.randint(3, 8))),
    ]


def make_csv(path: Path, megabytes: int) -> int:
    """Write a CSV of about ``megabytes`` MB (8 mixed columns); returns its data rows."""
    rng = random.Random(SEED)
    target = megabytes * 1_000_000
    rows = 0
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(",".join(HEADER) + "\n")
        while f.tell() < target:
            lines = []
            for _ in range(10_000):
                cells = _row(rng, rows)
                cells[3] = "true" if cells[3] else "false"
                lines.append(",".join(map(str, cells)))
                rows += 1
            f.write("\n".join(lines) + "\n")
    return rows


def make_xlsx(path: Path, megabytes: int) -> int:
    """Write an XLSX of about ``megabytes`` MB (one sheet, 8 mixed columns, constant memory);
    returns its data rows. The size is estimated from a 20,000-row probe."""
    rng = random.Random(SEED)
    probe = path.with_suffix(".probe.xlsx")
    _write_xlsx(probe, 20_000, rng)
    per_row = probe.stat().st_size / 20_000
    probe.unlink()
    rows = int(megabytes * 1_000_000 / per_row)
    _write_xlsx(path, rows, random.Random(SEED))
    return rows


def _write_xlsx(path: Path, rows: int, rng: random.Random) -> None:
    book = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    sheet = book.add_worksheet("Data")
    sheet.write_row(0, 0, HEADER)
    for i in range(rows):
        sheet.write_row(i + 1, 0, _row(rng, i))
    book.close()


@dataclass
class Run:
    seconds: float
    rows: int
    partials: int
    server_hwm_mb: float
    worker_hwm_mb: float | None
    #: Seconds from ``completed`` until the search indexer had written the version.
    index_s: float = 0.0


def _hwm_mb(pid: int) -> float:
    """Peak resident set (``VmHWM``) of a live process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_end_to_end(path: Path, fmt: str, tmp: Path, *, remote: bool, search: bool = True) -> Run:
    """Upload ``path`` to a fresh server and wait for its job; in-process or remote worker;
    ``search``: with ``[search] enabled`` (then :attr:`Run.index_s` is how long the search
    indexer took after the job completed)."""
    folder = Path(tempfile.mkdtemp(dir=tmp))
    workers = [] if remote else ["tabular_worker"]
    config = write_config(folder, workers={"in_process": workers}, search={"enabled": search})
    server = ServerProcess(config).start()
    worker: subprocess.Popen[bytes] | None = None
    try:
        key = server.create_key("bench", "org")
        if remote:
            env = server.worker_env(Scope("bench", "org"))
            worker = subprocess.Popen(
                [sys.executable, "-m", "workers_common.run", "tabular_worker"],
                env=env,
                stderr=(folder / "worker.log").open("wb"),
            )
        with httpx.Client(
            base_url=server.base_url, headers={"x-api-key": key}, timeout=600
        ) as client:
            started = time.perf_counter()
            with path.open("rb") as f:
                resp = client.post(
                    "/v1/ingest",
                    data={"format": fmt, "name": path.name},
                    files={"file": (path.name, f)},
                )
            resp.raise_for_status()
            job_id = resp.json()["jobId"]
            while True:
                job = client.get(f"/v1/ingest/{job_id}").json()
                if job["state"] in ("completed", "dead"):
                    break
                time.sleep(0.1)
            seconds = time.perf_counter() - started
            index_s = wait_search_indexed(client) if search and job["state"] == "completed" else 0
        if job["state"] != "completed":
            raise RuntimeError(f"{path.name}: job ended {job['state']}: {job['failureReason']}")
        assert server.proc is not None
        partials = sum(e["transition"] == "partial" for e in job["events"])
        return Run(
            seconds,
            int(job["stats"]["rows"]),
            partials,
            _hwm_mb(server.proc.pid),
            _hwm_mb(worker.pid) if worker is not None else None,
            index_s,
        )
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(20)
        server.stop()


def run_floor(path: Path, fmt: str, tmp: Path) -> tuple[float, int]:
    """Polars parse + one ``executemany`` of one node row per data row; ``(seconds, rows)``."""
    conn = floor_db(Path(tempfile.mkdtemp(dir=tmp)) / "floor.db")
    source = source_id_for(path.name).bytes
    started = time.perf_counter()
    if fmt == "xlsx":
        batches = iter([pl.read_excel(path, engine="calamine")])
    else:
        batches = pl.scan_csv(path).collect_batches(chunk_size=10_000)
    rows = 0
    conn.execute("BEGIN")
    for df in batches:
        props = df.select(pl.struct(pl.all()).struct.json_encode()).to_series().to_list()
        conn.executemany(
            "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
            " source_id, valid_from, valid_to) VALUES (1, ?, 1, '[\"TABLE_ROW\"]', ?, ?, ?,"
            " NULL, NULL)",
            [(uuid7().bytes, p.encode(), b"[[0,1]]", source) for p in props],
        )
        rows += len(props)
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds, rows


def search_overhead(csv_mb: int, rounds: int) -> int:
    """The CSV in-process with ``[search] enabled`` and disabled, alternating, ``rounds``
    each; prints the medians and the overhead (target at most 15 %)."""
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name:
        tmp = Path(tmp_name)
        path = tmp / "bench.csv"
        make_csv(path, csv_mb)
        on: list[Run] = []
        off: list[float] = []
        for _ in range(rounds):
            try:
                on.append(run_end_to_end(path, "csv", tmp, remote=False))
                off.append(run_end_to_end(path, "csv", tmp, remote=False, search=False).seconds)
            except RuntimeError as exc:
                print(f"tabular: {exc}", file=sys.stderr)
                return 1
        with_s = statistics.median(r.seconds for r in on)
        without_s = statistics.median(off)
        index_s = statistics.median(r.index_s for r in on)
        overhead = with_s / without_s - 1
        print(f"| csv {csv_mb} MB, in-process (median of {rounds}) | s |")
        print("|---|---|")
        print(f"| search enabled, to completed | {with_s:.2f} |")
        print(f"| search disabled | {without_s:.2f} |")
        print(f"| then until the search index was written | +{index_s:.2f} |")
        verdict = "PASS" if overhead <= SEARCH_OVERHEAD else "FAIL"
        target = f"target <= +{SEARCH_OVERHEAD:.0%}"
        print(f"search index overhead: {overhead:+.1%} ({target}): {verdict}")
    return 0


def main() -> int:
    """Generate the files, run every path, print the table; 1 if a job failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv-mb", type=int, default=100)
    parser.add_argument("--xlsx-mb", type=int, default=30)
    parser.add_argument(
        "--search-overhead",
        type=int,
        metavar="ROUNDS",
        default=0,
        help="only the CSV, in-process, with and without [search] enabled, ROUNDS each",
    )
    args = parser.parse_args()
    if args.search_overhead:
        return search_overhead(args.csv_mb, args.search_overhead)
    verdicts: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name:
        tmp = Path(tmp_name)
        files = []
        t0 = time.perf_counter()
        csv_path = tmp / "bench.csv"
        files.append(("csv", csv_path, make_csv(csv_path, args.csv_mb)))
        xlsx_path = tmp / "bench.xlsx"
        files.append(("xlsx", xlsx_path, make_xlsx(xlsx_path, args.xlsx_mb)))
        print(f"tabular: generated the files in {time.perf_counter() - t0:.1f} s")
        print(
            "| file | MB | rows | path | s | MB/s | rows/s | partials | server RSS MB |"
            " worker RSS MB | ratio |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for fmt, path, rows in files:
            mb = path.stat().st_size / 1e6
            floor_s, floor_rows = run_floor(path, fmt, tmp)
            print(
                f"| {fmt} | {mb:.1f} | {floor_rows:,} | floor | {floor_s:.2f} |"
                f" {mb / floor_s:.1f} | {floor_rows / floor_s:,.0f} | | | | 1.00 |"
            )
            for remote in (False, True):
                try:
                    run = run_end_to_end(path, fmt, tmp, remote=remote)
                except RuntimeError as exc:
                    print(f"tabular: {exc}", file=sys.stderr)
                    return 1
                if run.rows != rows:
                    print(f"tabular: {fmt}: {run.rows} rows ingested, {rows} written")
                ratio = run.seconds / floor_s
                worker_mb = f"{run.worker_hwm_mb:.0f}" if run.worker_hwm_mb is not None else "-"
                where = "remote worker" if remote else "in-process"
                print(
                    f"| {fmt} | {mb:.1f} | {run.rows:,} | {where} | {run.seconds:.2f} |"
                    f" {mb / run.seconds:.1f} | {run.rows / run.seconds:,.0f} |"
                    f" {run.partials} | {run.server_hwm_mb:.0f} | {worker_mb} | {ratio:.2f} |"
                )
                peak = max(run.server_hwm_mb, run.worker_hwm_mb or 0)
                verdicts += [
                    run.rows / run.seconds >= TARGET_ROWS_S,
                    peak <= TARGET_RSS_MB,
                    ratio <= TARGET_RATIO,
                ]
    print(
        f"targets: >= {TARGET_ROWS_S:,} rows/s, peak RSS <= {TARGET_RSS_MB} MB (server and"
        f" worker), ratio <= {TARGET_RATIO:g}: {'PASS' if all(verdicts) else 'FAIL'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
