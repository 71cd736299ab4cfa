"""A streaming worker module for tests: one ROW node per line, a partial every 10 lines, with
``STREAM_WORKER_PAUSE_S`` seconds between partials (so a test can kill it mid-stream)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from workers_common import IngestionResultBuilder, Job

FORMATS = ("tsv",)


def handle(job: Job) -> Iterator[dict[str, Any]]:
    lines = job.content.decode().split("\n")
    pause = float(os.environ.get("STREAM_WORKER_PAUSE_S", "0"))
    base = 0
    for start in range(0, len(lines), 10):
        b = IngestionResultBuilder(base_offset=base)
        for i, line in enumerate(lines[start : start + 10], start):
            span = b.add_span_text(line + "\n", kind="cell")
            b.add_node(["ROW"], {"i": i}, spans=[span])
        base += b.byte_length
        yield b.build()
        time.sleep(pause)
