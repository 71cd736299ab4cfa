"""A sync run's pages in the store, written once for both engines (docs/connectors.md,
"Sync runs").

Each page of a run's report is one transaction (:func:`apply_page`), fenced by the run's
lease and its ``seq``: the items read (their rows, and one child ingest job each, naming
the run as parent), the marks of what it listed or named removed, the answer — which
listed items to read — and the run's counts so far as its job's ``stats``. The last page
also retires what a complete listing no longer holds (:func:`gone_items`, under the prune
guard) and completes the run. Only the listed items' rows are read, never all of the
connector's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from telha.domain.connectors import ConnectorItem
from telha.domain.errors import Conflict, NotFound, OutOfSync
from telha.domain.model import JobCompletion, LeaseRef, NewJob, Scope
from telha.domain.sync_runs import (
    KnownItem,
    RunProgress,
    SyncPage,
    progress_of,
    prune_warning,
    wanted,
)
from telha.storage.connectors.registry import record_item
from telha.storage.core.tx import Tx
from telha.storage.jobs.lifecycle import add_event, check_lease, complete, enqueue
from telha.storage.versions.publish import retire

__all__ = ["RETIRE_REASON", "PageApply", "PageOutcome", "apply_page", "gone_items"]

#: The reason a connector's retire records on the version (``GET /v1/sources/{id}``).
RETIRE_REASON = "gone from its connector's listing"
#: Failed items a run's stats name (the count is always exact).
FAILED_SHOWN = 100
#: External ids per ``IN (…)`` list.
_IN_CHUNK = 2000


@dataclass(frozen=True, slots=True)
class PageApply:
    """One page to apply: ``children`` (the child job and item row of each item read, in
    page order), the run's connector and prune settings, the lease to fence and extend."""

    scope: Scope
    lease: LeaseRef
    connector_id: bytes
    page: SyncPage
    children: tuple[tuple[NewJob, ConnectorItem], ...]
    prune_max_fraction: float
    confirm_prune: bool
    worker: str
    now_us: int
    lease_us: int


@dataclass(frozen=True, slots=True)
class PageOutcome:
    """What a page did: ``wanted`` (the listed external ids to read next), ``replay`` (a
    repeated last page, answered again, nothing written), ``lease_deadline`` (µs, of a
    partial page), ``progress`` (the counts so far; final once ``finished``), the names of
    children refused as erased."""

    wanted: list[str]
    replay: bool
    lease_deadline: int
    progress: RunProgress
    finished: bool
    refused: tuple[str, ...] = ()


def _mark(lease: LeaseRef) -> bytes:
    """What a run's attempt marks its items with: the job id and the lease generation."""
    return lease.job_id + lease.lease_generation.to_bytes(8, "big")


def _chunks(ids: Sequence[str]) -> list[Sequence[str]]:
    return [ids[i : i + _IN_CHUNK] for i in range(0, len(ids), _IN_CHUNK)]


async def _known(tx: Tx, sid: int, connector_id: bytes, ids: Sequence[str]) -> dict[str, KnownItem]:
    """The rows of ``ids``: their markers as a run compares them (``None`` when the last
    job of the source ended ``dead`` or ``cancelled``: its bytes never made a version)."""
    out: dict[str, KnownItem] = {}
    for part in _chunks(ids):
        rows = await tx.fetchall(
            "SELECT i.external_id, CASE WHEN j.state IN ('dead', 'cancelled') THEN NULL"
            " ELSE i.marker END, i.retired_at FROM connector_items i"
            " LEFT JOIN sources s ON s.scope_id = i.scope_id AND s.source_id = i.source_id"
            " LEFT JOIN jobs j ON j.job_id = s.last_job_id"
            " WHERE i.scope_id = ? AND i.connector_id = ?"
            f" AND i.external_id IN ({', '.join('?' * len(part))})",
            sid, connector_id, *part,
        )  # fmt: skip
        for r in rows:
            out[str(r[0])] = KnownItem(str(r[1]) if r[1] is not None else None, r[2] is not None)
    return out


async def _set_marks(
    tx: Tx, sid: int, connector_id: bytes, ids: Sequence[str], assignments: str, *values: object
) -> None:
    for part in _chunks(ids):
        await tx.execute(
            f"UPDATE connector_items SET {assignments} WHERE scope_id = ? AND connector_id = ?"
            f" AND external_id IN ({', '.join('?' * len(part))})",
            *values, sid, connector_id, *part,
        )  # fmt: skip


async def gone_items(
    tx: Tx, sid: int, connector_id: bytes, mark: bytes, full_listing: bool
) -> list[tuple[str, bytes]]:
    """What a complete listing of this attempt retires (docs/connectors.md, "Deletions"),
    ``(external id, source id)`` by external id: among the connector's own live items (so
    never a source ingested by hand or by another connector), after a full listing those
    it did not list, after a delta those it named removed. An item that failed to read was
    listed, so it is never among them."""
    which = "(seen_mark IS NULL OR seen_mark <> ?)" if full_listing else "removed_mark = ?"
    rows = await tx.fetchall(
        "SELECT external_id, source_id FROM connector_items WHERE scope_id = ?"
        f" AND connector_id = ? AND retired_at IS NULL AND {which} ORDER BY external_id",
        sid, connector_id, mark,
    )  # fmt: skip
    return [(str(r[0]), bytes(r[1])) for r in rows]


async def _record_children(tx: Tx, sid: int, p: PageApply, progress: RunProgress) -> list[str]:
    """Write the item rows of the items read and enqueue their child jobs; count them added
    (no live row before) or changed. Returns the refused children's names."""
    ids = [row.external_id for _, row in p.children]
    await tx.lock_sources(sid, [job.source_id for job, _ in p.children])
    before = await _known(tx, sid, p.connector_id, ids)
    refused = []
    parent = f"parent={p.lease.job_id.hex()}"
    for job, row in p.children:
        k = before.get(row.external_id)
        if k is None or k.retired:
            progress.added += 1
        else:
            progress.changed += 1
        await record_item(tx, p.scope, row)
        outcome = await enqueue(
            tx, sid, job, p.now_us, dedup=True, detail=parent, parent=p.lease.job_id
        )
        if outcome.erased:
            refused.append(row.name)
            await add_event(tx, p.lease.job_id, p.now_us, "child_refused",
                            f"{row.name}: content erased")  # fmt: skip
    return refused


async def _finish(tx: Tx, sid: int, p: PageApply, progress: RunProgress) -> None:
    """The last page: the retires a complete listing allows, and the run's completion (its
    ``completed`` event says how long the retires took: ``retired=N retire_ms=M``)."""
    page = p.page
    t0 = time.perf_counter()
    progress.complete = bool(page.complete)
    progress.error = page.error
    if page.complete:
        gone = await gone_items(tx, sid, p.connector_id, _mark(p.lease), page.full_listing)
        live_row = await tx.fetchone(
            "SELECT count(*) FROM connector_items WHERE scope_id = ? AND connector_id = ?"
            " AND retired_at IS NULL",
            sid, p.connector_id,
        )  # fmt: skip
        # The guard judges against the sources live before this attempt: the items its
        # pages added (new, or back after a retire) are not counted, so a tree swapped for
        # a larger one is still held.
        live = (int(live_row[0]) if live_row is not None else 0) - progress.added
        progress.warning = prune_warning(len(gone), live, p.prune_max_fraction, p.confirm_prune)
        if progress.warning is None:
            # Every source lock before the first retire takes the clock row (PostgreSQL's
            # lock order: sources, then the clock).
            await tx.lock_sources(sid, [source_id for _, source_id in gone])
            for _, source_id in gone:
                try:
                    await retire(tx, sid, source_id, RETIRE_REASON)
                    progress.retired += 1
                except (NotFound, Conflict):
                    pass  # nothing current to retire; the item is still gone
            await _set_marks(
                tx, sid, p.connector_id, [ext for ext, _ in gone],
                "retired_at = ?, updated_at = ?", p.now_us, p.now_us,
            )  # fmt: skip
    # A run the guard held back keeps no checkpoint: the next one reads the changes again
    # (a delta's removals with them).
    if page.complete and progress.warning is None:
        progress.checkpoint = page.checkpoint
    progress.wanted = []
    stats = msgspec.json.encode(progress)
    detail = f"retired={progress.retired} retire_ms={(time.perf_counter() - t0) * 1000:.0f}"
    await complete(tx, sid, JobCompletion(p.lease, p.now_us, stats, (), p.worker), detail)


async def apply_page(tx: Tx, p: PageApply) -> PageOutcome:
    """Apply one page of a held run (see the module docstring).

    :raises StaleLease: the run is not held under ``p.lease``.
    :raises OutOfSync: a ``seq`` that is neither the next one nor a repeat of the last.
    """
    await check_lease(tx, p.lease)
    row = await tx.fetchone("SELECT stats FROM jobs WHERE job_id = ?", p.lease.job_id)
    progress = progress_of(
        bytes(row[0]) if row is not None and row[0] is not None else None,
        p.lease.lease_generation,
    )
    deadline = p.now_us + p.lease_us
    page = p.page
    if progress.next_seq > 0 and page.seq == progress.next_seq - 1:
        await tx.execute(
            "UPDATE jobs SET lease_deadline = ? WHERE job_id = ?", deadline, p.lease.job_id
        )
        return PageOutcome(list(progress.wanted), True, deadline, progress, False)
    if page.seq != progress.next_seq:
        raise OutOfSync(f"sync page seq {page.seq}, expected {progress.next_seq}")
    sid = await tx.scope_id(p.scope)
    mark = _mark(p.lease)
    cid = p.connector_id
    if page.removed:
        await _set_marks(tx, sid, cid, page.removed, "removed_mark = ?", mark)
    refused = await _record_children(tx, sid, p, progress)
    for f in page.failed:
        if len(progress.failed_items) < FAILED_SHOWN:
            progress.failed_items.append({"externalId": f.external_id, "reason": f.reason[:500]})
    progress.failed += len(page.failed)
    listed_ids = [e.external_id for e in page.listed]
    answer = wanted(page.listed, await _known(tx, sid, cid, listed_ids))
    progress.listed += len(listed_ids)
    progress.unchanged += len(listed_ids) - len(answer)
    seen = listed_ids + [row.external_id for _, row in p.children]
    seen += [f.external_id for f in page.failed]
    await _set_marks(tx, sid, cid, seen, "seen_mark = ?, removed_mark = NULL", mark)
    progress.next_seq = page.seq + 1
    progress.wanted = answer
    await add_event(
        tx, p.lease.job_id, p.now_us, "partial",
        f"seq={page.seq} listed={len(listed_ids)} read={len(p.children)}"
        f" removed={len(page.removed)} failed={len(page.failed)}",
    )  # fmt: skip
    if not page.partial:
        await _finish(tx, sid, p, progress)
        return PageOutcome([], False, 0, progress, True, tuple(refused))
    await tx.execute(
        "UPDATE jobs SET stats = ?, lease_deadline = ?, updated_at = ? WHERE job_id = ?",
        msgspec.json.encode(progress), deadline, p.now_us, p.lease.job_id,
    )  # fmt: skip
    return PageOutcome(answer, False, deadline, progress, False, tuple(refused))
