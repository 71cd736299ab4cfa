"""A ``PROCESS_POOL`` worker module for tests (``code`` jobs): by the job's name it dies
(``die.py``: ``os._exit``), fails typed (``bad.py``: corrupt_input), returns a generator
(``gen.py``: what a ``PROCESS_POOL`` handler may not do), or submits one
paragraph naming the process that ran it, so a test can tell a pool process from core."""

from __future__ import annotations

import os
from typing import Any

from workers_common import CorruptInput, IngestionResultBuilder, Job

FORMATS = ("code",)
PROCESS_POOL = True


def handle(job: Job) -> Any:
    if job.name == "die.py":
        os._exit(3)
    if job.name == "bad.py":
        raise CorruptInput("this input is refused")
    if job.name == "gen.py":  # a streaming handler cannot run in the pool: refused, typed
        return (part for part in [{"v": 1, "canonicalText": ""}])
    builder = IngestionResultBuilder()
    span = builder.add_span_text(f"ran in {os.getpid()}")
    builder.add_node(["DOCUMENT"], {"name": job.name, "pid": os.getpid()}, spans=[span])
    return builder.build()
