"""PostgreSQL's measured fast paths: the hottest operations as one call of a PL/pgSQL
function each (migrations 0002–0005), instead of one round trip per statement of the general
path in :mod:`telha.storage.core`. Each takes the general path's locks in its order and
writes the same rows; ``tests/integration/test_pg_fast_paths.py`` runs the same cases
through both and compares every row written (docs/architecture.md, "The storage seam")."""

from __future__ import annotations

from collections.abc import Sequence

from telha.domain.model import EnqueueOutcome, JobRecord, NewJob, Scope
from telha.domain.records import job_record
from telha.storage.core.jobs import JOB_COLS, JobOps
from telha.storage.postgres.base import PgBase
from telha.storage.postgres.tx import CHANNEL, Conn, source_lock_key

__all__ = ["FastJobOps"]


class FastJobOps(JobOps, PgBase):
    """:class:`~telha.storage.core.jobs.JobOps` with enqueue and lease as one call each."""

    async def enqueue_job(
        self, scope: Scope, job: NewJob, *, now_us: int, dedup: bool
    ) -> EnqueueOutcome:
        """:func:`telha.storage.core.jobs.enqueue_job` as one call of ``telha_enqueue``, its
        own transaction."""
        sid = await self._ensure_scope(scope)

        async def one(conn: Conn) -> EnqueueOutcome:
            row = await conn.fetchrow(
                "SELECT deduplicated, job_id, erased FROM telha_enqueue($1, $2, $3, $4, $5, $6,"
                " $7, $8, $9, $10, $11, $12)",
                job.job_id, sid, job.kind, job.format, job.source_id, job.content_hash,
                job.payload, now_us, dedup, None, source_lock_key(sid, job.source_id), CHANNEL,
            )  # fmt: skip
            assert row is not None
            return EnqueueOutcome(bool(row[0]), row[1], bool(row[2]))

        return await self._write("enqueue job", one, transaction=False)

    async def lease_next_job(
        self,
        formats: Sequence[str],
        *,
        scope: Scope | None,
        worker_id: str,
        now_us: int,
        lease_us: int,
    ) -> JobRecord | None:
        """:func:`telha.storage.core.jobs.lease` as one call of ``telha_lease`` (candidates
        per format in index order, ``SKIP LOCKED``, the lease and its event), its own
        transaction."""
        if not formats:
            return None
        sid = None
        if scope is not None:
            sid = await self._scope_id(scope)
            if sid is None:
                return None

        async def one(conn: Conn) -> JobRecord | None:
            row = await conn.fetchrow(
                f"SELECT {JOB_COLS} FROM telha_lease($1, $2, $3, $4, $5) j"
                " JOIN scopes s ON s.scope_id = j.scope_id",
                list(formats), now_us, worker_id, now_us + lease_us, sid,
            )  # fmt: skip
            return job_record(row) if row is not None else None

        return await self._write("lease job", one, transaction=False)
