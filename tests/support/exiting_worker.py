"""Worker modules for tests whose handlers raise what asyncio lets out of a task: by the
job's name, ``SystemExit`` (``*exit*``, as a library calling ``sys.exit(3)`` would) or
``KeyboardInterrupt`` (``*interrupt*``); anything else becomes an empty document.

``handle`` (``code`` jobs) is a plain handler, run in a worker thread;
:mod:`tests.support.exiting_async_worker` does the same on the event loop."""

from __future__ import annotations

import sys

from workers_common import Job

FORMATS = ("code",)


def outcome(job: Job) -> dict[str, object]:
    """Raise what the job's name asks for, or return an empty document."""
    if "exit" in job.name:
        sys.exit(3)
    if "interrupt" in job.name:
        raise KeyboardInterrupt(job.name)
    return {"v": 1, "canonicalText": ""}


def handle(job: Job) -> dict[str, object]:
    return outcome(job)
