"""Reads of the job table, written once for both engines: a job with its events, the next
time a pending job becomes available, the active jobs by kind and state (the aggregate
:class:`~telha.storage.jobs.aggregate.Jobs` serves them)."""

from __future__ import annotations

from collections.abc import Sequence

from telha.domain.model import JobEvent, JobRecord, Scope
from telha.domain.records import job_record
from telha.storage.core.tx import Tx

__all__ = [
    "JOB_COLS",
    "JOB_FROM",
    "JOB_RETURNING",
    "active_job_counts",
    "get_job",
    "next_available_at",
]

#: The columns of :func:`telha.domain.records.job_record`, over ``jobs j JOIN scopes s``.
JOB_COLS = (
    "j.job_id, s.tenant_id, s.organization_id, j.kind, j.format, j.source_id, j.content_hash,"
    " j.payload, j.state, j.attempts, j.lease_generation, j.lease_owner, j.lease_deadline,"
    " j.available_at, j.failure_reason, j.stats"
)
JOB_FROM = " FROM jobs j JOIN scopes s ON s.scope_id = j.scope_id"
#: :data:`JOB_COLS` as an ``UPDATE jobs … RETURNING`` list (the scope's names read by
#: subqueries: a ``RETURNING`` clause names the updated table only).
JOB_RETURNING = (
    JOB_COLS.replace("j.", "jobs.")
    .replace("s.tenant_id", "(SELECT s.tenant_id FROM scopes s WHERE s.scope_id = jobs.scope_id)")
    .replace(
        "s.organization_id",
        "(SELECT s.organization_id FROM scopes s WHERE s.scope_id = jobs.scope_id)",
    )
)


async def get_job(tx: Tx, scope: Scope | None, job_id: bytes, events: bool) -> JobRecord | None:
    """A job with its events (oldest first) unless ``events`` is false; ``None`` when absent
    or in another scope."""
    row = await tx.fetchone(f"SELECT {JOB_COLS}{JOB_FROM} WHERE j.job_id = ?", job_id)
    if row is None:
        return None
    job = job_record(row)
    if scope is not None and job.scope != scope:
        return None
    if not events:
        return job
    found = await tx.fetchall(
        "SELECT at, transition, detail FROM job_events WHERE job_id = ? ORDER BY seq", job_id
    )
    return job_record(row, tuple(JobEvent(*e) for e in found))


async def next_available_at(tx: Tx, formats: Sequence[str], scope: Scope | None) -> int | None:
    """Earliest ``available_at`` (µs) of a pending job of ``formats`` (in ``scope`` only,
    unless ``None``), or ``None``."""
    cond, params = tx.dialect.any("format", formats, "text")
    sql = f"SELECT min(available_at) FROM jobs WHERE state = 'pending' AND {cond}"
    if scope is not None:
        sid = await tx.known_scope_id(scope)
        if sid is None:
            return None
        sql, params = sql + " AND scope_id = ?", (*params, sid)
    row = await tx.fetchone(sql, *params)
    return int(row[0]) if row is not None and row[0] is not None else None


async def active_job_counts(tx: Tx) -> dict[tuple[str, str], int]:
    """``{(kind, state): n}`` for ``pending`` and ``leased`` jobs (each state counted through
    its partial index); absent pairs have no jobs."""
    rows = await tx.fetchall(
        "SELECT kind, 'pending', count(*) FROM jobs WHERE state = 'pending' GROUP BY kind"
        " UNION ALL"
        " SELECT kind, 'leased', count(*) FROM jobs WHERE state = 'leased' GROUP BY kind"
    )
    return {(str(kind), str(state)): int(n) for kind, state, n in rows}
