"""Benchmark: the CPU cost of one structured log line as ``telha serve`` writes it.

:func:`telha.logs.configure_logging` (JSON lines) to ``/dev/null``, then the access log's
``request`` line (seven fields) and a ``job_completed`` line with the job fields bound,
each written ``--lines`` times per round; the fastest of ``--rounds`` rounds counts (CPU
time of this process, steadier than wall time on a shared machine). Also a ``debug`` line,
dropped at level ``info``. Prints µs per line.

Run: ``.venv/bin/python bench/log_line.py [--lines N] [--rounds N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds a queue.py: drop it (sys.path[0]) so ``import queue`` finds the stdlib.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import time
from collections.abc import Callable

import structlog

from telha.logs import bound_job, configure_logging


def per_line(write: Callable[[], None], lines: int, rounds: int) -> float:
    """Fastest round's CPU µs per line."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(lines):
            write()
        best = min(best, time.process_time() - start)
    return best / lines * 1e6


def main() -> int:
    """Print µs per line for the three lines."""
    parser = argparse.ArgumentParser(prog="bench/log_line.py")
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with open("/dev/null", "w") as sink:
        configure_logging("info", sink)
        access = structlog.get_logger("telha.access")
        ingest = structlog.get_logger("telha.ingest")

        def request() -> None:
            access.info(
                "request", method="POST", route="/v1/ingest", status=202, duration_ms=1.23,
                tenant_id="bench", organization_id="main",
            )  # fmt: skip

        def completed() -> None:
            ingest.info("job_completed", deduplicated=False, nodes=2, children=0)

        def debug() -> None:
            ingest.debug("enqueued", bytes=16)

        fields = {
            "job_id": "0190a0b2-0000-7000-8000-000000000000", "kind": "ingest:text",
            "source_id": "0190a0b2-0000-7000-8000-000000000001", "attempt": 1,
            "tenant_id": "bench", "organization_id": "main",
        }  # fmt: skip
        print(f"| line | CPU µs per line ({args.rounds} rounds of {args.lines:,}) |")
        print("|---|---|")
        print(f"| request (access log) | {per_line(request, args.lines, args.rounds):.1f} |")
        with bound_job(**fields):
            done = per_line(completed, args.lines, args.rounds)
        print(f"| job_completed (job bound) | {done:.1f} |")
        print(f"| debug, dropped | {per_line(debug, args.lines, args.rounds):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
