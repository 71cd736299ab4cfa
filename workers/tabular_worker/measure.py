"""Throughput and peak memory of the tabular handler alone (not a test).

``python -m tabular_worker.measure [csv_mb] [xlsx_mb]`` writes a CSV of 8 mixed columns and an
XLSX (xlsxwriter ``constant_memory``) under the temp directory, runs ``handle()`` on each in a
fresh subprocess (ids fed back as core would, submissions dropped, not serialized) and prints
rows/s and the child's peak RSS (``ru_maxrss``). The files are deleted afterwards.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]


def _write_csv(path: Path, target_mb: int) -> None:
    words = ["alpha", "beta", "gamma, delta", "épsilon", 'quote "q"', "zeta"]
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write("id,name,amount,ratio,flag,day,stamp,note\n")
        i = 0
        while f.tell() < target_mb * 1_000_000:
            lines = []
            for j in range(i, i + 10_000):
                w = words[j % len(words)]
                lines.append(
                    f'{j},"{w.replace(chr(34), chr(34) * 2)}",{j * 7 % 100_000},{j % 1000 / 7:.4f},'
                    f"{'true' if j % 3 else 'false'},2026-{j % 12 + 1:02d}-{j % 28 + 1:02d},"
                    f"2026-01-01T{j % 24:02d}:{j % 60:02d}:00,note number {j}\n"
                )
            f.write("".join(lines))
            i += 10_000


def _write_xlsx(path: Path, target_mb: int) -> None:
    import xlsxwriter  # type: ignore[import-untyped]  # dev dependency, no stubs

    book = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    sheet = book.add_worksheet("Data")
    sheet.write_row(0, 0, ["id", "name", "amount", "ratio", "flag", "note"])
    row = 1
    while True:
        for _ in range(10_000):
            sheet.write_row(
                row, 0, [row, f"name {row % 977}", row * 7 % 100_000, row / 7, row % 2 == 0, "n"]
            )
            row += 1
        # ~5.2 compressed bytes per cell measured with xlsxwriter; stop near the target.
        if row * 6 * 5.2 > target_mb * 1_000_000:
            break
    book.close()


def _child(path: str, fmt: str) -> None:
    from tabular_worker import handle
    from workers_common import Job

    job = Job("m", f"ingest:{fmt}", fmt, Path(path).name, None, None, {}, 0, "t", "o", Path(path))
    start = time.perf_counter()
    gen = handle(job)
    rows = parts = 0
    sub = next(gen)
    while True:
        parts += 1
        rows += sum(1 for n in sub["nodes"] if n["labels"] == ["TABLE_ROW"])
        try:
            sub = gen.send([str(k) for k in range(len(sub["nodes"]))])
        except StopIteration:
            break
    secs = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "rows": rows,
        "partials": parts,
        "secs": round(secs, 2),
        "rows_per_s": round(rows / secs),
        "peak_rss_mb": round(rss_mb),
    }
    print(json.dumps(result))  # noqa: T201


def main() -> None:
    """Run the measurement (see the module docstring)."""
    csv_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    xlsx_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    folder = Path(tempfile.mkdtemp(prefix="telha-measure-"))
    try:
        for fmt, mb, write in (("csv", csv_mb, _write_csv), ("xlsx", xlsx_mb, _write_xlsx)):
            path = folder / f"big.{fmt}"
            write(path, mb)
            size = path.stat().st_size / 1e6
            out = subprocess.run(
                [sys.executable, "-m", "tabular_worker.measure", "--child", str(path), fmt],
                capture_output=True,
                text=True,
                check=True,
                env=os.environ.copy(),
            )
            print(f"{fmt} {size:.0f} MB: {out.stdout.strip()}")  # noqa: T201
            path.unlink()
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
