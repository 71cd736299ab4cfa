"""Job retention, written once for both engines (docs/operations.md, "Retention"): ended
jobs older than a cutoff are removed with their events, subscriptions and undelivered
webhook deliveries, and raw uploaded bytes that nothing names any more go with them.

**What is removed.** A job in a terminal state (:data:`~telha.domain.model.TERMINAL_JOB_STATES`)
whose ``updated_at`` (the time it ended: a terminal job's row is never written again) is
before the cutoff — unless a source version names it, as the job that wrote it
(``source_versions.job_id``) or the erasure that erased it (``erasure_id``). Those jobs are
a version's provenance and are kept as long as the version (versions are never removed):
``GET /v1/sources/{id}`` names them, the archive-member rule reads their ``enqueued`` event
(:mod:`telha.storage.versions.members`), a repeated erasure answers from its erase job's
result, and ``telha check`` (``job_states``) requires them. Everything else a job left —
its events, its own webhook subscription, deliveries not yet made (the deliverer would drop
them as ``gone``), a streaming checkpoint (a terminal job holds none) — goes in the same
transaction as its row. Child jobs keep naming a removed parent (``parentJobId``).

**Sources.** A removed job that was its source's last job (``sources.last_job_id``) hands
that role to the source's newest remaining job; a source left with no job and no version
at all (a file whose only job died) loses its row, so it is no longer listed and
``GET /v1/sources/{id}`` answers 404 — exactly as if it had never been ingested.

**Raw bytes.** A raw blob (:mod:`telha.storage.raw.chunks`) written before the cutoff that no
remaining job (any state) and no version of its scope names is removed, its chunks a
bounded number per transaction: the first marks it incomplete (no read uses it from then),
the last removes its row. ``store.raw.put`` refreshes a blob it finds stored (and a store
starting over an incomplete one refreshes it too), so bytes a new job is about to use are
never older than the cutoff when that job is enqueued.

**Bounded.** Jobs are examined ``batch`` at a time (oldest end first, one transaction
each, on the ``jobs_ended`` index), so SQLite's writer is never held for long; raw
blobs are found on a reader and removed one transaction per :data:`CHUNKS_PER_TX` chunks.
A kept job is examined again by each pass unless the caller passes the key the last pass
reached (``after``): a kept job stays kept, since the version naming it is never removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from telha.domain.model import TERMINAL_JOB_STATES
from telha.domain.row_faults import RowFault
from telha.storage.core.dialect import Dialect
from telha.storage.core.failed_rows import note
from telha.storage.core.row_faults import per_row
from telha.storage.core.tx import Tx, any_groups

__all__ = [
    "CHUNKS_PER_TX",
    "BlobCandidate",
    "JobBatch",
    "JobKey",
    "RetentionResult",
    "blob_candidates",
    "count_jobs",
    "ended_jobs_sql",
    "remove_blob",
    "remove_jobs",
]

#: Raw chunks (1 MiB each) removed per transaction. SQLite's ``secure_delete`` zeroes what it
#: frees: 8 chunks took 24 ms (median) on a 2-core machine, 64 took 0.8 s.
CHUNKS_PER_TX = 8
#: Jobs examined per transaction.
JOBS_PER_TX = 1000
#: Raw blobs looked up per read.
BLOBS_PER_READ = 500

_STATES = "state IN (" + ", ".join(f"'{s}'" for s in TERMINAL_JOB_STATES) + ")"
#: The job ``j`` has ended (the ``jobs_ended`` index's condition).
_ENDED = f"j.{_STATES}"
#: A version names the job ``j``: it wrote it, or it erased it.
_KEPT = (
    "(EXISTS (SELECT 1 FROM source_versions v WHERE v.scope_id = j.scope_id"
    " AND v.source_id = j.source_id AND v.job_id = j.job_id)"
    " OR EXISTS (SELECT 1 FROM source_versions v WHERE v.erasure_id = j.job_id))"
)
#: The job ``j`` is removed by a pass with this cutoff (one ``?``: the cutoff, µs).
_REMOVABLE = f"({_ENDED} AND j.updated_at < ? AND NOT {_KEPT})"
#: Nothing that stays names the raw blob ``b`` (one ``?``: the cutoff).
_UNNAMED = (
    "NOT EXISTS (SELECT 1 FROM source_versions v WHERE v.scope_id = b.scope_id"
    " AND v.content_hash = b.content_hash)"
    " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.scope_id = b.scope_id"
    f" AND j.content_hash = b.content_hash AND NOT {_REMOVABLE})"
)

#: ``(updated_at, job_id)`` of the last job a pass examined.
JobKey = tuple[int, bytes]


@dataclass(frozen=True, slots=True)
class RetentionResult:
    """What a pass removed (or, dry, would remove).

    :param jobs: job rows.
    :param events: their job events.
    :param raw_blobs: raw uploads (whole blobs).
    :param raw_bytes: the raw uploads' size, bytes.
    :param payload_bytes: the removed jobs' payloads (inline content included), bytes.
    :param after: the key the job scan reached: pass it as the next pass's ``after``.
    :param faults: the rows it could not examine (left as they are, passed by;
        docs/architecture.md, "Supervision and bad rows").
    """

    jobs: int = 0
    events: int = 0
    raw_blobs: int = 0
    raw_bytes: int = 0
    payload_bytes: int = 0
    after: JobKey | None = None
    faults: tuple[RowFault, ...] = ()

    @property
    def bytes_freed(self) -> int:
        """Raw upload bytes plus job payload bytes removed."""
        return self.raw_bytes + self.payload_bytes


@dataclass(frozen=True, slots=True)
class JobBatch:
    """One transaction's work: jobs ``examined`` (removed, kept or faulty), the counts
    removed, the key of the last job examined (``None`` when none was) and the jobs that
    could not be examined (left as they are)."""

    examined: int
    jobs: int
    events: int
    payload_bytes: int
    last: JobKey | None
    faults: tuple[RowFault, ...] = ()


@dataclass(frozen=True, slots=True)
class BlobCandidate:
    """A raw blob nothing names: ``(scope id, BLAKE3 digest, size in bytes)``."""

    sid: int
    digest: bytes
    size: int


async def _in_groups(tx: Tx, sql: str, column: str, ids: Sequence[bytes], *params: Any) -> int:
    """Run ``sql`` (with ``{cond}`` for ``column`` being one of ``ids``, then ``params``)
    over ``ids`` in groups SQLite's parameter limit allows; the rows it changed."""
    changed = 0
    for cond, values in any_groups(tx, column, ids, "bytea"):
        changed += await tx.execute(sql.format(cond=cond), *values, *params)
    return changed


async def _hand_over(tx: Tx, removed: dict[tuple[int, bytes], list[bytes]]) -> None:
    """After the jobs ``removed`` (by ``(scope id, source id)``) went: a source whose last
    job was one of them takes its newest remaining job, and one left with no job and no
    version loses its row."""
    for (sid, source_id), ids in sorted(removed.items()):
        cond, values = tx.dialect.any("last_job_id", ids, "bytea")
        await tx.execute(
            "UPDATE sources SET last_job_id = (SELECT k.job_id FROM jobs k"
            " WHERE k.scope_id = sources.scope_id AND k.source_id = sources.source_id"
            " ORDER BY k.created_at DESC, k.job_id DESC LIMIT 1)"
            f" WHERE scope_id = ? AND source_id = ? AND {cond}",
            sid, source_id, *values,
        )  # fmt: skip
        await tx.execute(
            "DELETE FROM sources WHERE scope_id = ? AND source_id = ? AND last_job_id IS NULL"
            " AND version_count = 0 AND NOT EXISTS (SELECT 1 FROM source_versions v"
            " WHERE v.scope_id = sources.scope_id AND v.source_id = sources.source_id)",
            sid, source_id,
        )  # fmt: skip


def ended_jobs_sql(after: bool, limit: int, dialect: Dialect, lock: str = "") -> str:
    """The next ``limit`` ended jobs (``jobs_ended`` index) before a cutoff (``?``), after a
    key (``?, ?, ?``: its ``updated_at`` twice, its id) when ``after``: each job's id, end,
    scope, source, whether a version names it, and its payload's size; ``lock`` is appended
    (:attr:`Tx.skip_locked <telha.storage.core.tx.Tx.skip_locked>`)."""
    where = f"{_ENDED} AND j.updated_at < ?"
    if after:
        # The first term bounds the index range; the second skips the key itself.
        where += " AND j.updated_at >= ? AND (j.updated_at > ? OR j.job_id > ?)"
    return (
        f"SELECT j.job_id, j.updated_at, j.scope_id, j.source_id, {_KEPT},"
        f" {dialect.byte_length}(j.payload) FROM jobs j WHERE {where}"
        f" ORDER BY j.updated_at, j.job_id LIMIT {int(limit)}{lock}"
    )


async def remove_jobs(tx: Tx, before_us: int, after: JobKey | None, limit: int) -> JobBatch:
    """Examine the next ``limit`` ended jobs (oldest end first, strictly after ``after``)
    that ended before ``before_us`` (µs), and remove those no version names, with their
    events, subscriptions and undelivered deliveries (module docstring). On PostgreSQL a
    job another transaction holds is skipped (``SKIP LOCKED``). A job whose row cannot be
    read is left as it is and returned among the batch's faults."""
    params: list[Any] = [before_us]
    if after is not None:
        params += [after[0], after[0], after[1]]
    sql = ended_jobs_sql(after is not None, limit, tx.dialect, lock=tx.skip_locked)
    rows = await tx.fetchall(sql, *params)
    if not rows:
        return JobBatch(0, 0, 0, 0, None)
    # The key as stored: the scan passes the last row examined, faulty or not.
    last = cast(JobKey, (rows[-1][1], rows[-1][0]))
    gone: list[tuple[bytes, int, bytes, int]] = []  # (job id, scope id, source id, size)
    faults: list[RowFault] = []
    for r in rows:
        if r[4]:  # a version names it: kept
            continue
        try:
            with per_row(tx, "retention_job", r[0]):
                gone.append((bytes(r[0]), int(r[2]), bytes(r[3]), int(r[5] or 0)))
        except RowFault as fault:
            faults.append(fault)
    ids = [g[0] for g in gone]
    if not ids:
        return JobBatch(len(rows), 0, 0, 0, last, tuple(faults))
    events = await _in_groups(tx, "DELETE FROM job_events WHERE {cond}", "job_id", ids)
    for table in ("job_webhooks", "webhook_deliveries"):
        await _in_groups(tx, f"DELETE FROM {table} WHERE {{cond}}", "job_id", ids)
    jobs = await _in_groups(tx, f"DELETE FROM jobs WHERE {{cond}} AND {_STATES}", "job_id", ids)
    by_source: dict[tuple[int, bytes], list[bytes]] = {}
    for job_id, sid, source_id, _ in gone:
        by_source.setdefault((sid, source_id), []).append(job_id)
    await _hand_over(tx, by_source)
    payload = sum(g[3] for g in gone)
    return JobBatch(len(rows), jobs, events, payload, last, tuple(faults))


async def count_jobs(tx: Tx, before_us: int) -> tuple[int, int, int]:
    """``(jobs, events, payload bytes)`` a pass with cutoff ``before_us`` would remove (a
    read: ``telha gc --dry-run``)."""
    row = await tx.fetchone(
        f"SELECT count(*), coalesce(sum({tx.dialect.byte_length}(j.payload)), 0) FROM jobs j"
        f" WHERE {_REMOVABLE}",
        before_us,
    )
    events = await tx.fetchone(
        f"SELECT count(*) FROM job_events e JOIN jobs j ON j.job_id = e.job_id WHERE {_REMOVABLE}",
        before_us,
    )
    assert row is not None and events is not None
    return int(row[0]), int(events[0]), int(row[1])


async def blob_candidates(
    tx: Tx, before_us: int, after: tuple[int, bytes] | None, limit: int
) -> tuple[list[BlobCandidate], tuple[int, bytes] | None]:
    """Up to ``limit`` raw blobs (strictly after ``after`` in ``(scope id, digest)`` order)
    written before ``before_us`` that nothing staying names: no version of the scope, no job
    that a pass with this cutoff keeps; and the key to read the next page from (``None``:
    this was the last). A blob whose row cannot be read is logged (``row_failed``) and left
    out."""
    where = "b.created_at < ?"
    params: list[Any] = [before_us]
    if after is not None:
        where += " AND (b.scope_id > ? OR (b.scope_id = ? AND b.content_hash > ?))"
        params += [after[0], after[0], after[1]]
    rows = await tx.fetchall(
        f"SELECT b.scope_id, b.content_hash, b.size FROM raw_blobs b WHERE {where}"
        f" AND {_UNNAMED} ORDER BY b.scope_id, b.content_hash LIMIT {int(limit)}",
        *params, before_us,
    )  # fmt: skip
    found = []
    for r in rows:
        try:
            with per_row(tx, "raw_blob", (r[0], r[1])):
                found.append(BlobCandidate(int(r[0]), bytes(r[1]), int(r[2])))
        except RowFault as fault:  # it stays (its bytes are not removed)
            note(fault)
    # The key as stored: the next page starts past the last row read, faulty or not.
    nxt = cast(tuple[int, bytes], (rows[-1][0], rows[-1][1])) if len(rows) == limit else None
    return found, nxt


async def remove_blob(tx: Tx, blob: BlobCandidate, before_us: int, budget: int) -> bool | None:
    """Remove up to ``budget`` chunks of ``blob`` (the last ones first), then its row once
    none is left: ``True`` when the blob is gone, ``False`` when chunks remain (call again),
    ``None`` when it is no longer removable (refreshed by a new store, or named again:
    left as it is, a store in progress rewrites what was removed)."""
    row = await tx.fetchone(
        "SELECT b.size FROM raw_blobs b WHERE b.scope_id = ? AND b.content_hash = ?"
        f" AND b.created_at < ? AND {_UNNAMED}{tx.for_update}",
        blob.sid, blob.digest, before_us, before_us,
    )  # fmt: skip
    if row is None:
        return None
    key = (blob.sid, blob.digest)
    await tx.execute(
        "UPDATE raw_blobs SET complete = false WHERE scope_id = ? AND content_hash = ?", *key
    )
    top = await tx.fetchone(
        "SELECT max(idx) FROM raw_chunks WHERE scope_id = ? AND content_hash = ?", *key
    )
    first = 0 if top is None or top[0] is None else int(top[0]) + 1 - budget
    await tx.execute(
        "DELETE FROM raw_chunks WHERE scope_id = ? AND content_hash = ? AND idx >= ?",
        *key, first,
    )  # fmt: skip
    if first > 0:
        return False
    await tx.execute("DELETE FROM raw_blobs WHERE scope_id = ? AND content_hash = ?", *key)
    return True
