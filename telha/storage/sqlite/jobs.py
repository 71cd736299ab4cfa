"""Job rows and events on SQLite (DESIGN.md §4, §6): enqueue with request-level dedup, lease,
heartbeat, fail, release, reap. Every operation is one write transaction on the single writer.

Mixed into :class:`~telha.storage.sqlite.store.SqliteStore`; the retry policy itself is pure
(:mod:`telha.queue.policy`) and arrives as a callable, so the engine picks no outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiosqlite

from telha.errors import StaleLease
from telha.ids import id_str
from telha.model import EnqueueOutcome, JobEvent, JobRecord, LeaseRef, NewJob, Scope
from telha.queue.policy import Decide, FailureDecision
from telha.storage.sqlite.base import SqliteBase

__all__ = ["JobsMixin", "add_event", "check_lease"]

_JOB_COLS = (
    "j.job_id, s.tenant_id, s.organization_id, j.kind, j.format, j.source_id, j.content_hash,"
    " j.payload, j.state, j.attempts, j.lease_generation, j.lease_owner, j.lease_deadline,"
    " j.available_at, j.failure_reason, j.stats"
)
_FROM = " FROM jobs j JOIN scopes s ON s.scope_id = j.scope_id"


def _job(row: Sequence[Any], events: tuple[JobEvent, ...] = ()) -> JobRecord:
    (job_id, tenant, org, kind, fmt, source_id, chash, payload, state, attempts, gen, owner,
     deadline, available_at, reason, stats) = row  # fmt: skip
    return JobRecord(
        job_id, Scope(tenant, org), kind, fmt, source_id, chash, payload, state, attempts,
        gen, owner, deadline, available_at, reason, stats, events,
    )  # fmt: skip


async def add_event(
    w: aiosqlite.Connection, job_id: bytes, at: int, transition: str, detail: str | None
) -> None:
    """Append one event to a job's event list (inside the caller's transaction)."""
    await w.execute(
        "INSERT INTO job_events (job_id, seq, at, transition, detail) VALUES (?,"
        " (SELECT coalesce(max(seq), 0) + 1 FROM job_events WHERE job_id = ?), ?, ?, ?)",
        (job_id, job_id, at, transition, detail),
    )


async def check_lease(w: aiosqlite.Connection, lease: LeaseRef) -> tuple[Any, ...]:
    """The leased job's ``(scope_id, attempts, format)``; raises :class:`StaleLease` when the
    job is not leased under ``lease.lease_generation``."""
    async with w.execute(
        "SELECT scope_id, attempts, format, state, lease_generation FROM jobs WHERE job_id = ?",
        (lease.job_id,),
    ) as cur:
        row = await cur.fetchone()
    if row is None or row[3] != "leased" or row[4] != lease.lease_generation:
        raise StaleLease("job is not leased under this lease generation")
    return tuple(row[:3])


class JobsMixin(SqliteBase):
    """Job operations of the SQLite engine; see :class:`telha.storage.protocol.Storage`."""

    async def enqueue_job(
        self, scope: Scope, job: NewJob, *, now_us: int, dedup: bool
    ) -> EnqueueOutcome:
        """Insert a pending job, unless (with ``dedup``) the source's latest version already has
        ``job.content_hash`` or a pending/leased job covers the same ``(source, hash)``."""
        async with self._transaction("enqueue job") as w:
            sid = await self._scope_id(scope, create=True)
            assert sid is not None
            if dedup:
                outcome = await self._enqueue_dedup(w, sid, job)
                if outcome is not None:
                    await w.execute("ROLLBACK")
                    return outcome
            await self._insert_job(w, sid, job, now_us, None)
        return EnqueueOutcome(False, job.job_id)

    async def _enqueue_in_tx(
        self, w: aiosqlite.Connection, sid: int, job: NewJob, now_us: int, *, parent: bytes
    ) -> EnqueueOutcome:
        """A child job (spec 004 step 7) inside the parent's transaction, with request-level
        dedup (fetch formats, with no content hash, skip it)."""
        if job.content_hash is not None:
            outcome = await self._enqueue_dedup(w, sid, job)
            if outcome is not None:
                return outcome
        await self._insert_job(w, sid, job, now_us, f"parent={id_str(parent)}")
        return EnqueueOutcome(False, job.job_id)

    @staticmethod
    async def _insert_job(
        w: aiosqlite.Connection, sid: int, job: NewJob, now_us: int, detail: str | None
    ) -> None:
        await w.execute(
            "INSERT INTO jobs (job_id, scope_id, kind, format, source_id, content_hash,"
            " payload, state, available_at, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            (job.job_id, sid, job.kind, job.format, job.source_id, job.content_hash,
             job.payload, now_us, now_us, now_us),
        )  # fmt: skip
        await add_event(w, job.job_id, now_us, "enqueued", detail)

    async def _enqueue_dedup(
        self, w: aiosqlite.Connection, sid: int, job: NewJob
    ) -> EnqueueOutcome | None:
        latest = await self._latest_hashes(w, sid, job.source_id)
        if latest is not None and latest[0] == job.content_hash:
            return EnqueueOutcome(True, None)
        async with w.execute(
            "SELECT job_id FROM jobs WHERE scope_id = ? AND source_id = ? AND content_hash = ?"
            " AND state IN ('pending', 'leased') ORDER BY created_at LIMIT 1",
            (sid, job.source_id, job.content_hash),
        ) as cur:
            active = await cur.fetchone()
        return EnqueueOutcome(True, active[0]) if active is not None else None

    async def lease_next_job(
        self,
        formats: Sequence[str],
        *,
        scope: Scope | None,
        worker_id: str,
        now_us: int,
        lease_us: int,
    ) -> JobRecord | None:
        """Lease the oldest available pending job of ``formats`` (of ``scope`` only, unless
        ``None``): state ``leased``, generation + 1, deadline ``now_us + lease_us``."""
        if not formats:
            return None
        marks = ",".join("?" * len(formats))
        params: list[Any] = [*formats, now_us]
        scope_sql = ""
        if scope is not None:
            sid = await self._scope_id(scope, create=False)
            if sid is None:
                return None
            scope_sql = " AND scope_id = ?"
            params.append(sid)
        async with self._transaction("lease job") as w:
            async with w.execute(
                "UPDATE jobs SET state = 'leased', lease_generation = lease_generation + 1,"
                " lease_owner = ?, lease_deadline = ?, updated_at = ? WHERE job_id = ("
                f"SELECT job_id FROM jobs WHERE state = 'pending' AND format IN ({marks})"
                f" AND available_at <= ?{scope_sql} ORDER BY available_at, job_id LIMIT 1)"
                " RETURNING job_id",
                (worker_id, now_us + lease_us, now_us, *params),
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                await w.execute("ROLLBACK")
                return None
            await add_event(w, row[0], now_us, "leased", f"worker={worker_id}")
            async with w.execute(f"SELECT {_JOB_COLS}{_FROM} WHERE j.job_id = ?", row) as cur:
                job = await cur.fetchone()
        assert job is not None
        return _job(job)

    async def next_available_at(self, formats: Sequence[str]) -> int | None:
        """Earliest ``available_at`` (µs) of a pending job of ``formats``, or ``None``."""
        if not formats:
            return None
        marks = ",".join("?" * len(formats))
        rows = await self._fetchall(
            f"SELECT min(available_at) FROM jobs WHERE state = 'pending' AND format IN ({marks})",
            tuple(formats),
        )
        return rows[0][0] if rows and rows[0][0] is not None else None

    async def heartbeat_jobs(
        self, leases: Sequence[LeaseRef], *, now_us: int, lease_us: int
    ) -> list[bytes]:
        """Extend the leases still held under the given generations; returns their ids."""
        extended: list[bytes] = []
        async with self._transaction("extend leases") as w:
            for lease in leases:
                cur = await w.execute(
                    "UPDATE jobs SET lease_deadline = ?, updated_at = ? WHERE job_id = ?"
                    " AND state = 'leased' AND lease_generation = ?",
                    (now_us + lease_us, now_us, lease.job_id, lease.lease_generation),
                )
                if cur.rowcount:
                    extended.append(lease.job_id)
        return extended

    async def fail_job(
        self, lease: LeaseRef, kind: str, reason: str, *, now_us: int, decide: Decide
    ) -> JobRecord:
        """Record a failed attempt of a held job: back to pending (retried) or dead.

        :raises StaleLease: the caller does not hold the job.
        """
        async with self._transaction("record failure") as w:
            _, attempts, _ = await check_lease(w, lease)
            await self._apply_failure(w, lease.job_id, kind, reason, attempts, now_us, decide)
            async with w.execute(
                f"SELECT {_JOB_COLS}{_FROM} WHERE j.job_id = ?", (lease.job_id,)
            ) as cur:
                row = await cur.fetchone()
        assert row is not None
        return _job(row)

    @staticmethod
    async def _apply_failure(
        w: aiosqlite.Connection,
        job_id: bytes,
        kind: str,
        reason: str,
        attempts: int,
        now_us: int,
        decide: Decide,
    ) -> FailureDecision:
        d = decide(kind, attempts)
        await w.execute(
            "UPDATE jobs SET state = ?, attempts = ?, available_at = ?, failure_reason = ?,"
            " lease_owner = NULL, lease_deadline = NULL, updated_at = ? WHERE job_id = ?",
            (d.state, d.attempts, d.available_at, reason, now_us, job_id),
        )
        transition = "dead" if d.state == "dead" else "retried"
        if kind == "lease_expired":
            await add_event(w, job_id, now_us, "lease_expired", reason)
            if d.state == "dead":
                await add_event(w, job_id, now_us, "dead", reason)
        else:
            await add_event(w, job_id, now_us, transition, reason)
        return d

    async def release_job(self, lease: LeaseRef, *, now_us: int, detail: str) -> bool:
        """Give a held job back (shutdown): pending at once, the attempt not counted."""
        async with self._transaction("release job") as w:
            cur = await w.execute(
                "UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_deadline = NULL,"
                " available_at = ?, updated_at = ? WHERE job_id = ? AND state = 'leased'"
                " AND lease_generation = ?",
                (now_us, now_us, lease.job_id, lease.lease_generation),
            )
            released = bool(cur.rowcount)
            if released:
                await add_event(w, lease.job_id, now_us, "released", detail)
        return released

    async def reap_expired(self, *, now_us: int, decide: Decide) -> list[tuple[bytes, str, str]]:
        """Expired leases back to pending (a failed attempt, ``lease_expired``) or dead.

        :returns: ``(job_id, format, new state)`` per reaped job.
        """
        reaped: list[tuple[bytes, str, str]] = []
        async with self._transaction("reap leases") as w:
            async with w.execute(
                "SELECT job_id, attempts, format, lease_owner FROM jobs"
                " WHERE state = 'leased' AND lease_deadline < ?",
                (now_us,),
            ) as cur:
                rows = list(await cur.fetchall())
            for job_id, attempts, fmt, owner in rows:
                reason = f"lease_expired: lease of worker {owner} ran out"
                d = await self._apply_failure(
                    w, job_id, "lease_expired", reason, attempts, now_us, decide
                )
                reaped.append((job_id, fmt, d.state))
        return reaped

    async def get_job(self, scope: Scope | None, job_id: bytes) -> JobRecord | None:
        """A job with its events (oldest first); ``None`` when absent or in another scope."""
        rows = await self._fetchall(f"SELECT {_JOB_COLS}{_FROM} WHERE j.job_id = ?", (job_id,))
        if not rows:
            return None
        job = _job(rows[0])
        if scope is not None and job.scope != scope:
            return None
        events = await self._fetchall(
            "SELECT at, transition, detail FROM job_events WHERE job_id = ? ORDER BY seq",
            (job_id,),
        )
        return _job(rows[0], tuple(JobEvent(*e) for e in events))
