"""The job aggregate of a store (``store.jobs``): enqueue, lease, heartbeat, fail, release,
lose, reap, cancel, the reads the queue needs and a job's events as the live stream reads
them, each one transaction or one read of the engine's runners over
:mod:`telha.storage.jobs.lifecycle`, :mod:`telha.storage.jobs.reads`,
:mod:`telha.storage.jobs.cancel` and :mod:`telha.storage.jobs.events`
(:class:`telha.storage.jobs.role.JobStore` is its contract; docs/architecture.md, "A
job's life"). Times in µs.

An engine may make it a subclass with a measured fast path that a parity test holds to the
same rows (PostgreSQL's :class:`~telha.storage.postgres.fast.FastJobs`)."""

from __future__ import annotations

from collections.abc import Sequence

from telha.domain.model import EnqueueOutcome, JobEventPage, JobRecord, LeaseRef, NewJob, Scope
from telha.domain.policy import Decide, DecideLoss
from telha.storage.core.engine import EngineOps
from telha.storage.jobs import cancel as c
from telha.storage.jobs import lifecycle as j
from telha.storage.jobs import reads as r
from telha.storage.jobs.events import events_after

__all__ = ["Jobs"]


class Jobs:
    """A component the store composes, not a mixin: ``engine`` runs each operation."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def enqueue(
        self, scope: Scope, job: NewJob, *, now_us: int, dedup: bool, max_pending: int = 0
    ) -> EnqueueOutcome:
        """See :func:`telha.storage.jobs.lifecycle.enqueue_job`."""
        return await self._engine.transaction(
            "enqueue job", j.enqueue_job, scope, job, now_us, dedup, max_pending
        )

    async def lease_next(
        self,
        formats: Sequence[str],
        *,
        scope: Scope | None,
        worker_id: str,
        now_us: int,
        lease_us: int,
    ) -> JobRecord | None:
        """See :func:`telha.storage.jobs.lifecycle.lease`; ``None`` without ``formats``."""
        if not formats:
            return None
        return await self._engine.transaction(
            "lease job", j.lease, formats, scope, worker_id, now_us, lease_us
        )

    async def next_available_at(
        self, formats: Sequence[str], scope: Scope | None = None
    ) -> int | None:
        """See :func:`telha.storage.jobs.reads.next_available_at`."""
        if not formats:
            return None
        return await self._engine.read(r.next_available_at, formats, scope)

    async def active_counts(self) -> dict[tuple[str, str], int]:
        """See :func:`telha.storage.jobs.reads.active_job_counts`."""
        return await self._engine.read(r.active_job_counts)

    async def heartbeat(
        self, leases: Sequence[LeaseRef], *, now_us: int, lease_us: int
    ) -> list[bytes]:
        """See :func:`telha.storage.jobs.lifecycle.heartbeat`."""
        if not leases:
            return []
        return await self._engine.transaction(
            "extend leases", j.heartbeat, leases, now_us, lease_us
        )

    async def fail(
        self, lease: LeaseRef, kind: str, reason: str, *, now_us: int, decide: Decide
    ) -> JobRecord:
        """See :func:`telha.storage.jobs.lifecycle.fail`."""
        return await self._engine.transaction(
            "record failure", j.fail, lease, kind, reason, now_us, decide
        )

    async def release(self, lease: LeaseRef, *, now_us: int, detail: str) -> bool:
        """See :func:`telha.storage.jobs.lifecycle.release`."""
        return await self._engine.transaction("release job", j.release, lease, now_us, detail)

    async def reap_expired(self, *, now_us: int, decide: DecideLoss) -> list[tuple[JobRecord, str]]:
        """See :func:`telha.storage.jobs.lifecycle.reap`."""
        return await self._engine.transaction("reap leases", j.reap, now_us, decide)

    async def lose(
        self, leases: Sequence[LeaseRef], *, now_us: int, detail: str, decide: DecideLoss
    ) -> list[tuple[JobRecord, str]]:
        """See :func:`telha.storage.jobs.lifecycle.lose`."""
        if not leases:
            return []
        return await self._engine.transaction("lose jobs", j.lose, leases, now_us, detail, decide)

    async def get(
        self, scope: Scope | None, job_id: bytes, *, events: bool = True
    ) -> JobRecord | None:
        """See :func:`telha.storage.jobs.reads.get_job`."""
        return await self._engine.read(r.get_job, scope, job_id, events)

    async def cancel(
        self, scope: Scope, job_id: bytes, *, now_us: int, children: bool = False
    ) -> c.CancelOutcome:
        """See :func:`telha.storage.jobs.cancel.cancel_job`."""
        return await self._engine.transaction(
            "cancel job", c.cancel_job, scope, job_id, now_us, children
        )

    async def lease_states(self, job_ids: Sequence[bytes]) -> dict[bytes, tuple[str, int]]:
        """See :func:`telha.storage.jobs.cancel.lease_states`."""
        if not job_ids:
            return {}
        return await self._engine.read(c.lease_states, job_ids)

    async def events_after(
        self, scope: Scope, job_id: bytes, after_seq: int, *, limit: int
    ) -> JobEventPage | None:
        """See :func:`telha.storage.jobs.events.events_after`."""
        return await self._engine.read(events_after, scope, job_id, after_seq, limit)
