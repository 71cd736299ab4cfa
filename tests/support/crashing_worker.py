"""A worker module for tests that dies on specific inputs (for the poison cap, ``[jobs]
max_worker_losses``): a ``code`` job named ``*crash-process*`` ends the worker process at once
(``os._exit(17)``, as a segfault or the OOM killer would); one named ``*crash-task*`` raises
:class:`ConsumerDeath`, which no consumer catches: in-process it kills that consumer task (standing
in for any death of one), not ``telha serve``. A job named ``*hold*`` waits ``HOLD_S`` seconds (60
by default) first. Anything else becomes an empty document."""

from __future__ import annotations

import os

import anyio

from workers_common import Job

FORMATS = ("code",)


class ConsumerDeath(BaseException):
    """Not an ``Exception``: the consumer lets it through, so its task dies."""


async def handle(job: Job) -> dict[str, object]:
    if "hold" in job.name:
        await anyio.sleep(float(os.environ.get("HOLD_S", "60")))
    if "crash-process" in job.name:
        os._exit(17)
    if "crash-task" in job.name:
        raise ConsumerDeath(job.name)
    return {"v": 1, "canonicalText": ""}
