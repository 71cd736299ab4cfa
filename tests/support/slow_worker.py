"""A worker module for tests: holds every ``code`` job for ``SLOW_WORKER_S`` seconds (60 by
default) so a test can catch it in flight, then submits an empty document."""

from __future__ import annotations

import os
import time

from workers_common import Job

FORMATS = ("code",)


def handle(job: Job) -> dict[str, object]:
    time.sleep(float(os.environ.get("SLOW_WORKER_S", "60")))
    return {"v": 1, "canonicalText": ""}
