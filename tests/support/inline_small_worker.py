"""A ``PROCESS_POOL`` worker module for tests (``code`` jobs) that sets
``PROCESS_POOL_MIN_BYTES``: it submits one paragraph naming the process that ran it, so a
test can tell a small input run in core's thread from a larger one run in a pool process."""

from __future__ import annotations

import os
from typing import Any

from workers_common import IngestionResultBuilder, Job

FORMATS = ("code",)
PROCESS_POOL = True
PROCESS_POOL_MIN_BYTES = 64


def handle(job: Job) -> Any:
    builder = IngestionResultBuilder()
    span = builder.add_span_text(f"ran in {os.getpid()}")
    builder.add_node(["DOCUMENT"], {"name": job.name, "pid": os.getpid()}, spans=[span])
    return builder.build()
