"""A ``PROCESS_POOL`` worker module for tests (``code`` jobs): by the job's name it dies
(``die.py``: ``os._exit``), fails typed (``bad.py``: corrupt_input), or submits one
paragraph naming the process that ran it, so a test can tell a pool process from core."""

from __future__ import annotations

import os

from workers_common import CorruptInput, IngestionResultBuilder, Job

FORMATS = ("code",)
PROCESS_POOL = True


def handle(job: Job) -> dict[str, object]:
    if job.name == "die.py":
        os._exit(3)
    if job.name == "bad.py":
        raise CorruptInput("this input is refused")
    builder = IngestionResultBuilder()
    span = builder.add_span_text(f"ran in {os.getpid()}")
    builder.add_node(["DOCUMENT"], {"name": job.name, "pid": os.getpid()}, spans=[span])
    return builder.build()
