"""A streaming worker module for tests: a valid partial, then an invalid one (core refuses
it), then more it never gets to send; its ``finally`` writes ``CLOSING_WORKER_MARK`` so a
test can see the consumer closed the generator."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workers_common import IngestionResultBuilder, Job

FORMATS = ("tsv",)


def handle(job: Job) -> Iterator[dict[str, Any]]:
    try:
        b = IngestionResultBuilder()
        b.add_node(["ROW"], {"i": 0}, spans=[b.add_span_text("row 0\n", kind="cell")])
        yield b.build()
        bad = IngestionResultBuilder(base_offset=b.byte_length)
        bad.add_node(["not a label"], {}, spans=[bad.add_span_text("row 1\n", kind="cell")])
        yield bad.build()
        yield from ({"v": 1, "canonicalText": f"more {i}\n"} for i in range(1000))
    finally:
        Path(os.environ["CLOSING_WORKER_MARK"]).write_text("closed")
