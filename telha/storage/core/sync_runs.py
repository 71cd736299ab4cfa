"""Sync runs in the store, written once for both engines (docs/connectors.md, "Sync runs").

A run is a job of kind ``sync:<kind>`` whose ``source_id`` is its connector's id and whose
name is ``NULL`` (so it makes no row in the source listing). :func:`apply_run` is the one
transaction that ends a run: the lease fence, the items' rows, the retires the rules of
:mod:`telha.domain.sync_runs` chose, the child jobs (one per new or changed item) and the
run's completion with its counts as the job's ``stats``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from telha.domain.connectors import ConnectorItem, ConnectorRecord
from telha.domain.errors import Conflict, NotFound
from telha.domain.model import JobCompletion, NewJob, Scope
from telha.storage.core.connectors import CONNECTOR_COLS, connector_row, record_item
from telha.storage.core.engine import EngineOps
from telha.storage.core.jobs import check_lease, complete, enqueue
from telha.storage.core.publish import retire
from telha.storage.core.tx import Tx

__all__ = [
    "RunApply",
    "RunRow",
    "SyncRunOps",
    "apply_run",
    "list_runs",
    "scheduled",
    "start_run",
]

_CONNECTOR_COLS_C = ", ".join(f"c.{c.strip()}" for c in CONNECTOR_COLS.split(","))

#: The reason a connector's retire records on the version (``GET /v1/sources/{id}``).
RETIRE_REASON = "gone from its connector's listing"


@dataclass(frozen=True, slots=True)
class RunApply:
    """What ends a run: ``items`` to write (new, changed; ``retired_at`` None), ``retire``
    the items to retire (their sources too), the completion (children, counts as stats)."""

    scope: Scope
    items: tuple[ConnectorItem, ...]
    retire: tuple[ConnectorItem, ...]
    completion: JobCompletion
    now_us: int


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


async def apply_run(tx: Tx, run: RunApply) -> tuple[int, tuple[str, ...]]:
    """End a held run: write ``items``, retire ``retire`` (a source with no published
    version yet, or being erased, only has its item marked), complete the job with its
    children. Returns how many sources were retired and the refused children's names.

    :raises StaleLease: the run is not held under the completion's lease.
    """
    await check_lease(tx, run.completion.lease)
    sid = await tx.scope_id(run.scope)
    for item in run.items:
        await record_item(tx, run.scope, item)
    retired = 0
    for item in run.retire:
        try:
            await retire(tx, sid, item.source_id, RETIRE_REASON)
            retired += 1
        except (NotFound, Conflict):
            pass  # nothing current to retire; the item is still gone from the connector
        await tx.execute(
            "UPDATE connector_items SET retired_at = ?, updated_at = ? WHERE scope_id = ?"
            " AND connector_id = ? AND external_id = ? AND retired_at IS NULL",
            run.now_us, run.now_us, sid, item.connector_id, item.external_id,
        )  # fmt: skip
    refused = await complete(tx, sid, run.completion, None)
    return retired, refused


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


class SyncRunOps(EngineOps):
    """The sync run operations of :class:`telha.storage.protocol_connectors.ConnectorStore`."""

    async def start_sync_run(
        self, scope: Scope, job: NewJob, *, now_us: int, every_us: int | None = None
    ) -> bytes | None:
        """See :func:`start_run`."""
        return await self._transaction("start sync run", start_run, scope, job, now_us, every_us)

    async def scheduled_connectors(self) -> list[tuple[Scope, ConnectorRecord]]:
        """See :func:`scheduled`."""
        return await self._read(scheduled)

    async def apply_sync_run(self, run: RunApply) -> tuple[int, tuple[str, ...]]:
        """See :func:`apply_run`."""
        return await self._transaction("apply sync run", apply_run, run)

    async def sync_runs(
        self, scope: Scope, connector_id: bytes, *, limit: int = 50
    ) -> Sequence[RunRow]:
        """See :func:`list_runs`."""
        return await self._read(list_runs, scope, connector_id, limit)
