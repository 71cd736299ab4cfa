"""A worker module for tests: holds every ``code`` job for a minute (to be caught in flight)."""

from __future__ import annotations

import time

from workers_common import Job

FORMATS = ("code",)


def handle(job: Job) -> dict[str, object]:
    time.sleep(60)
    return {"v": 1, "canonicalText": ""}
