"""Sync runs in the store, written once for both engines (docs/connectors.md, "Sync runs").

A run is a job of kind ``sync:<kind>`` whose ``source_id`` is its connector's id and whose
name is ``NULL`` (so it makes no row in the source listing). Its report comes in pages,
each one transaction (:mod:`telha.storage.connectors.sync_pages`); the run's counts so far, then
its final counts, are the job's ``stats``.
"""

from __future__ import annotations

from dataclasses import dataclass

from telha.domain.connectors import ConnectorRecord
from telha.domain.model import NewJob, Scope
from telha.storage.connectors.registry import CONNECTOR_COLS, connector_row
from telha.storage.core.tx import Tx
from telha.storage.jobs.lifecycle import enqueue

__all__ = [
    "RunRow",
    "list_runs",
    "scheduled",
    "start_run",
]

_CONNECTOR_COLS_C = ", ".join(f"c.{c.strip()}" for c in CONNECTOR_COLS.split(","))


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run as listed: the job's id, state, times (µs), stats (JSON bytes) and failure."""

    run_id: bytes
    state: str
    created_at: int
    updated_at: int
    stats: bytes | None
    failure_reason: str | None


async def start_run(
    tx: Tx, scope: Scope, job: NewJob, now_us: int, every_us: int | None = None
) -> bytes | None:
    """Enqueue a run job unless one of the same connector is pending or leased (then
    ``None``: one run at a time per connector). ``every_us`` (a schedule's start): also
    ``None`` when the connector's last run started less than ``every_us`` ago — checked
    under the connector's lock, so replicas scheduling at once start one run."""
    sid = await tx.scope_id(scope)
    await tx.lock_sources(sid, (job.source_id,))
    busy = await tx.fetchone(
        "SELECT job_id FROM jobs WHERE scope_id = ? AND source_id = ? AND kind = ?"
        " AND state IN ('pending', 'leased') LIMIT 1",
        sid, job.source_id, job.kind,
    )  # fmt: skip
    if busy is not None:
        return None
    if every_us is not None:
        last = await tx.fetchone(
            "SELECT max(created_at) FROM jobs WHERE scope_id = ? AND source_id = ?"
            " AND kind = ?",
            sid, job.source_id, job.kind,
        )  # fmt: skip
        if last is not None and last[0] is not None and now_us - int(last[0]) < every_us:
            return None
    await enqueue(tx, sid, job, now_us, dedup=False)
    return job.job_id


async def list_runs(tx: Tx, scope: Scope, connector_id: bytes, limit: int) -> list[RunRow]:
    """The connector's runs, newest first, at most ``limit``."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    rows = await tx.fetchall(
        "SELECT job_id, state, created_at, updated_at, stats, failure_reason FROM jobs"
        " WHERE scope_id = ? AND source_id = ? AND kind LIKE 'sync:%'"
        " ORDER BY job_id DESC LIMIT ?",
        sid, connector_id, limit,
    )  # fmt: skip
    return [
        RunRow(bytes(r[0]), str(r[1]), int(r[2]), int(r[3]),
               bytes(r[4]) if r[4] is not None else None, r[5])
        for r in rows
    ]  # fmt: skip


async def scheduled(tx: Tx) -> list[tuple[Scope, ConnectorRecord]]:
    """Every live connector with a schedule, across scopes (the scheduler's pass)."""
    rows = await tx.fetchall(
        f"SELECT s.tenant_id, s.organization_id, {_CONNECTOR_COLS_C} FROM connectors c"
        " JOIN scopes s ON s.scope_id = c.scope_id"
        " WHERE c.removed_at IS NULL AND c.every_s IS NOT NULL ORDER BY c.connector_id"
    )
    return [(Scope(r[0], r[1]), connector_row(r[2:])) for r in rows]
