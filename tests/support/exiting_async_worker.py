"""The ``async def`` twin of :mod:`tests.support.exiting_worker` (``markdown`` jobs): its
handler raises ``SystemExit`` or ``KeyboardInterrupt`` on the event loop itself."""

from __future__ import annotations

from tests.support.exiting_worker import outcome
from workers_common import Job

FORMATS = ("markdown",)


async def handle(job: Job) -> dict[str, object]:
    return outcome(job)
