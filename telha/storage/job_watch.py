"""In-process wake-ups for readers of a job's events (``GET /v1/ingest/{jobId}/events``,
docs/rest-api.md "Live events").

The store calls :meth:`JobEventSignal.signal` once a transaction that appended events to some
jobs has committed (each engine's transaction runner, and PostgreSQL's fast paths). A reader
*arms* a wake-up for its job before it reads the job's events, so an event committed between
its read and its wait is never missed; it then waits on the wake-up with a timeout, after
which it reads again anyway: that periodic re-read is how an event written by another
replica on the same database reaches it.

Bounded: there is an entry only for a job somebody is watching now, and it goes with the last
watcher. Nothing is queued: a wake-up is one :class:`anyio.Event` a job, set once and replaced
when re-armed, so a burst of events costs one wake-up and one read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import anyio

__all__ = ["JobEventSignal", "JobWatch"]


class JobWatch:
    """One reader's registration for one job (from :meth:`JobEventSignal.watch`)."""

    def __init__(self, signal: JobEventSignal, job_id: bytes) -> None:
        self._signal = signal
        self.job_id = job_id

    def armed(self) -> anyio.Event:
        """The wake-up the next signal of this job sets: take it *before* reading the job's
        events, then wait on it after."""
        return self._signal.arm(self.job_id)


class JobEventSignal:
    """Which watched jobs got new events; see the module's docstring. Called on the event
    loop only (a SQLite transaction signals after its writer thread handed the result back).
    """

    def __init__(self) -> None:
        #: A wake-up per job that has been armed since its last signal.
        self._wakeups: dict[bytes, anyio.Event] = {}
        #: How many readers watch each job now.
        self._watchers: dict[bytes, int] = {}

    @property
    def watching(self) -> int:
        """Readers watching a job now (one per open event stream)."""
        return sum(self._watchers.values())

    @contextmanager
    def watch(self, job_id: bytes) -> Iterator[JobWatch]:
        """Register a reader of ``job_id``'s events for the ``with`` block."""
        self._watchers[job_id] = self._watchers.get(job_id, 0) + 1
        try:
            yield JobWatch(self, job_id)
        finally:
            left = self._watchers.pop(job_id) - 1
            if left:
                self._watchers[job_id] = left
            else:
                self._wakeups.pop(job_id, None)

    def arm(self, job_id: bytes) -> anyio.Event:
        """The wake-up of ``job_id`` that its next signal sets (see :meth:`JobWatch.armed`)."""
        wakeup = self._wakeups.get(job_id)
        if wakeup is None:
            wakeup = self._wakeups[job_id] = anyio.Event()
        return wakeup

    def signal(self, job_ids: Iterable[bytes]) -> None:
        """Wake every reader armed on one of ``job_ids`` (events of theirs were committed)."""
        if not self._wakeups:
            return
        for job_id in job_ids:
            wakeup = self._wakeups.pop(job_id, None)
            if wakeup is not None:
                wakeup.set()
