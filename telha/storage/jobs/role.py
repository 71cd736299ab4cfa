"""The job aggregate's role (docs/architecture.md, "A job's life"): a store's ``jobs``.
Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from telha.domain.model import EnqueueOutcome, JobEventPage, JobRecord, LeaseRef, NewJob, Scope
from telha.domain.policy import Decide, DecideLoss
from telha.storage.jobs.cancel import CancelOutcome

__all__ = ["JobStore"]


class JobStore(Protocol):
    """The job table, a store's ``jobs`` (:class:`~telha.storage.jobs.aggregate.Jobs`): what
    the :class:`~telha.queue.job_queue.JobQueue` enqueues, leases, heartbeats, fails,
    releases, reaps, cancels and counts. Times in µs."""

    async def enqueue(
        self, scope: Scope, job: NewJob, *, now_us: int, dedup: bool, max_pending: int = 0
    ) -> EnqueueOutcome:
        """Insert a pending job; with ``dedup``, request-level dedup against the latest version
        and against a pending/leased job of the same ``(source, content hash)``; with
        ``max_pending`` > 0, refused when the scope has that many pending jobs
        (:class:`~telha.domain.errors.QuotaExceeded`, nothing written)."""

    async def lease_next(
        self,
        formats: Sequence[str],
        *,
        scope: Scope | None,
        worker_id: str,
        now_us: int,
        lease_us: int,
    ) -> JobRecord | None:
        """Lease the oldest available pending job of ``formats`` (``scope=None``: any scope)."""

    async def next_available_at(
        self, formats: Sequence[str], scope: Scope | None = None
    ) -> int | None:
        """Earliest ``available_at`` (µs) among pending jobs of ``formats`` (of ``scope``)."""

    async def active_counts(self) -> dict[tuple[str, str], int]:
        """``{(kind, state): n}`` of jobs now ``pending`` and ``leased`` (for the gauges)."""

    async def heartbeat(
        self, leases: Sequence[LeaseRef], *, now_us: int, lease_us: int
    ) -> list[bytes]:
        """Extend the leases still held; returns the ids extended."""

    async def fail(
        self, lease: LeaseRef, kind: str, reason: str, *, now_us: int, decide: Decide
    ) -> JobRecord:
        """Record a failed attempt (retried or dead per ``decide``).

        :raises StaleLease: the lease is not current.
        """

    async def release(self, lease: LeaseRef, *, now_us: int, detail: str) -> bool:
        """Give a held job back to pending without counting an attempt."""

    async def reap_expired(self, *, now_us: int, decide: DecideLoss) -> list[tuple[JobRecord, str]]:
        """Expired leases → pending or dead (``decide("lease_expired", attempts, losses)``, the
        losses counted from the job's ``worker_lost``/``lease_expired`` events); ``(job as
        reaped, new state)`` per job."""

    async def lose(
        self, leases: Sequence[LeaseRef], *, now_us: int, detail: str, decide: DecideLoss
    ) -> list[tuple[JobRecord, str]]:
        """Jobs lost with their worker (its ``PollJobs`` stream ended), in one
        transaction: each one still leased under its generation gets a ``worker_lost`` event
        (``detail``), a failed attempt and ``decide("worker_lost", attempts, losses)``'s state
        (a ``dead`` event with the decision's reason when it is dead); leases no longer held
        are skipped. Pending jobs wake their pollers (on every replica).

        :returns: ``(job as it was when lost, new state)`` per job that was still held.
        """

    async def get(
        self, scope: Scope | None, job_id: bytes, *, events: bool = True
    ) -> JobRecord | None:
        """A job (with its events unless ``events=False``); ``None`` when absent or in
        another scope."""

    async def cancel(
        self, scope: Scope, job_id: bytes, *, now_us: int, children: bool = False
    ) -> CancelOutcome:
        """Cancel a pending or leased job (and with ``children`` its unfinished descendants)
        in one transaction; a leased one's generation is bumped (docs/architecture.md,
        "Cancel"). Cancelling a cancelled job again changes nothing.

        :raises NotFound: no such job in ``scope``.
        :raises JobFinished: the job ended ``completed`` (without ``children``) or ``dead``.
        :raises Conflict: the job is an erasure.
        """

    async def lease_states(self, job_ids: Sequence[bytes]) -> dict[bytes, tuple[str, int]]:
        """``{job_id: (state, lease_generation)}`` of those of ``job_ids`` that exist (a
        replica checking the leases it handed out)."""

    async def events_after(
        self, scope: Scope, job_id: bytes, after_seq: int, *, limit: int
    ) -> JobEventPage | None:
        """The job's state, then at most ``limit`` of its events with ``seq > after_seq``
        (oldest first); ``None`` when absent or in another scope (docs/rest-api.md, "Live
        events")."""
