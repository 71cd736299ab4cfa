"""Job rows and their events, once for both engines (docs/architecture.md, "A job's life"):
enqueue with request-level and fetch-format dedup, lease, heartbeat, fail, release, lose,
reap, and the helpers the version and erasure operations share (lease fence, completion with
child jobs, stream abandonment).

Every function here runs inside one transaction of a :class:`~telha.storage.core.tx.Tx`.
On PostgreSQL each write a lease guards locks the job row (``tx.for_update``) and checks the
lease generation in the same transaction; enqueue holds the source's advisory lock while it
reads what dedup compares with; a job that becomes available notifies pollers on every
replica. On SQLite the single writer serialises the same steps. The retry policy is pure
(:mod:`telha.domain.policy`) and arrives as a callable, so storage picks no outcomes.

The statements PostgreSQL's fast paths run too are in :mod:`telha.storage.jobs.statements`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telha.domain.dedup import Latest, same_identity
from telha.domain.erasure import blockable, payload_name, scrub_payload
from telha.domain.errors import StaleLease
from telha.domain.ids import id_str
from telha.domain.model import (
    Continuation,
    EnqueueOutcome,
    JobCompletion,
    JobRecord,
    LeaseRef,
    NewJob,
    Scope,
)
from telha.domain.policy import LOSS_KINDS, Decide, DecideLoss, FailureDecision
from telha.domain.records import (
    decode_continuation,
    encode_continuation,
    job_record,
    with_children,
)
from telha.storage.core.blocklist import BLOCKED, blocked
from telha.storage.core.row_faults import per_row
from telha.storage.core.sources import note_job
from telha.storage.core.tx import Rollback, Tx
from telha.storage.jobs import fair_lease
from telha.storage.jobs.lease_fence import check_lease, fence_held
from telha.storage.jobs.reads import JOB_COLS, JOB_FROM, JOB_RETURNING
from telha.storage.jobs.statements import (
    ACTIVE_FETCH,
    ADD_EVENT,
    COMPLETE_JOB,
    INSERT_JOB,
    LATEST_VERSION,
    LEASE_JOB,
    active_same_content,
)
from telha.storage.quotas.limits import hold_pending
from telha.storage.webhooks.deliveries import job_ended, record_job_webhook

__all__ = [
    "abandon_stream",
    "add_event",
    "blocked_latest",
    "check_lease",
    "complete",
    "end_erased",
    "enqueue",
    "enqueue_job",
    "fail",
    "fence_held",
    "heartbeat",
    "latest_identity",
    "lease",
    "lose",
    "reap",
    "release",
    "select_job",
    "store_continuation",
]

#: Whether one of the digests is blocklisted, and the source's latest version (or a row of
#: ``NULL``s): parameters ``(scope, digests…, scope, source)``, ``{digests}`` as in
#: :data:`~telha.storage.core.blocklist.BLOCKED`.
BLOCKED_LATEST = (
    "SELECT EXISTS (" + BLOCKED + "), v.* FROM (SELECT 1 AS one) o"
    " LEFT JOIN (" + LATEST_VERSION + ") v ON true"
)

_LOSSES_SQL = (
    "SELECT count(*) FROM job_events WHERE job_id = ? AND transition IN ("
    + ", ".join(f"'{k}'" for k in sorted(LOSS_KINDS))
    + ")"
)


async def add_event(tx: Tx, job_id: bytes, at: int, transition: str, detail: str | None) -> None:
    """Append one event to a job's event list (the caller holds the job row, so two events of
    one job never race for a seq); the job's event readers are woken once it commits."""
    await tx.execute(ADD_EVENT, job_id, job_id, at, transition, detail)
    tx.wrote_event(job_id)


async def select_job(tx: Tx, job_id: bytes) -> JobRecord:
    """The job row (without events) as it is inside the transaction."""
    row = await tx.fetchone(f"SELECT {JOB_COLS}{JOB_FROM} WHERE j.job_id = ?", job_id)
    assert row is not None
    return job_record(row)


async def latest_identity(tx: Tx, sid: int, source_id: bytes) -> Latest | None:
    """What dedup compares with (:class:`telha.domain.dedup.Latest`): a source's latest
    published version, retired or erased or not; ``None`` when it has none. A streamed
    version still open, or abandoned, is not published."""
    return _latest(await tx.fetchone(LATEST_VERSION, sid, source_id))


def _latest(row: tuple[Any, ...] | None) -> Latest | None:
    """A :data:`LATEST_VERSION` row as :class:`Latest` (``None``: no row, or ``NULL``s)."""
    if row is None or row[7] is None:
        return None
    identity = row[4].encode() if isinstance(row[4], str) else row[4]
    retired, erased = row[5] is not None, row[6] is not None
    return Latest(row[0], row[1], row[2], row[3], identity, retired, erased, int(row[7]))


async def blocked_latest(
    tx: Tx, sid: int, digests: Sequence[bytes | None], source_id: bytes
) -> tuple[bool, Latest | None]:
    """:func:`~telha.storage.core.blocklist.blocked` for ``digests`` and
    :func:`latest_identity` of ``source_id`` in one statement (the write paths that ask
    both, under the source's lock: an enqueue with dedup, a single shot's commit)."""
    cond, params = tx.dialect.any("digest", sorted(blockable(digests)), "bytea")
    row = await tx.fetchone(BLOCKED_LATEST.format(digests=cond), sid, *params, sid, source_id)
    assert row is not None
    return bool(row[0]), _latest(row[1:])


async def _dedup(tx: Tx, sid: int, job: NewJob, latest: Latest | None) -> EnqueueOutcome | None:
    """Request-level dedup of a job with ``dedup`` asked: with a content hash, against the
    source's latest version (:func:`telha.domain.dedup.same_identity`: the same bytes and
    fingerprint) and an active job of the same ``(source, hash, fingerprint)``; a fetch-format
    job (no hash yet, say a crawl's child) against an active job fetching the same
    ``(source, format)``. The oldest active job answers. ``latest``: the source's latest
    version, read by the caller (with a content hash)."""
    if job.content_hash is not None:
        if same_identity(latest, job.content_hash, job.fingerprint):
            return EnqueueOutcome(True, None)
        active = await tx.fetchone(
            active_same_content(tx.dialect),
            sid, job.source_id, job.content_hash, job.fingerprint,
        )  # fmt: skip
    else:
        active = await tx.fetchone(ACTIVE_FETCH, sid, job.source_id, job.format)
    return EnqueueOutcome(True, active[0]) if active is not None else None


async def enqueue(
    tx: Tx,
    sid: int,
    job: NewJob,
    now_us: int,
    *,
    dedup: bool,
    detail: str | None = None,
    parent: bytes | None = None,
) -> EnqueueOutcome:
    """Insert a pending job, its ``enqueued`` event, its source's row
    (:func:`telha.storage.core.sources.note_job`) and a wake-up, inside the current
    transaction, under the source's lock (when it has a content hash or asks for dedup). A
    content hash on the scope's erasure blocklist is refused first (``erased``, nothing
    written); with ``dedup``, request-level dedup (:func:`_dedup`). A deduplicated or refused
    job writes nothing (the caller decides whether to roll back). ``parent``: the job whose
    completion enqueues this one."""
    if job.content_hash is not None or dedup:
        await tx.lock_sources(sid, (job.source_id,))
    if job.content_hash is not None and dedup:
        # Both reads in one statement (bench/RESULTS.md, "Fourth round").
        erased, latest = await blocked_latest(tx, sid, (job.content_hash,), job.source_id)
        if erased:
            return EnqueueOutcome(False, None, erased=True)
        outcome = await _dedup(tx, sid, job, latest)
        if outcome is not None:
            return outcome
    elif job.content_hash is not None and await blocked(tx, sid, (job.content_hash,)):
        return EnqueueOutcome(False, None, erased=True)
    elif dedup:
        outcome = await _dedup(tx, sid, job, None)
        if outcome is not None:
            return outcome
    await tx.execute(
        INSERT_JOB,
        job.job_id, sid, job.kind, job.format, job.source_id, job.content_hash, job.payload,
        now_us, now_us, now_us, job.name, parent, job.fingerprint,
    )  # fmt: skip
    if job.webhook is not None:
        await record_job_webhook(tx, job.job_id, job.webhook)
    await add_event(tx, job.job_id, now_us, "enqueued", detail)
    await note_job(tx, sid, job, now_us)
    await fair_lease.note_head(tx, sid, job.format)
    await tx.notify(job.format)
    return EnqueueOutcome(False, job.job_id)


async def enqueue_job(
    tx: Tx, scope: Scope, job: NewJob, now_us: int, dedup: bool, max_pending: int = 0
) -> EnqueueOutcome:
    """:meth:`~telha.storage.jobs.role.JobStore.enqueue` as one transaction: a job that
    is deduplicated or refused rolls back (nothing written).

    ``max_pending`` > 0: the scope's ``max_pending_jobs``, held under its quota lock
    (:func:`telha.storage.quotas.limits.hold_pending`).

    :raises QuotaExceeded: the scope has ``max_pending`` pending jobs.
    """
    sid = await tx.scope_id(scope)
    if max_pending > 0:
        await hold_pending(tx, scope, sid, max_pending)
    outcome = await enqueue(tx, sid, job, now_us, dedup=dedup)
    if outcome.deduplicated or outcome.erased:
        raise Rollback(outcome)
    return outcome


async def store_continuation(tx: Tx, job_id: bytes, c: Continuation | None, now_us: int) -> None:
    """Write (or with ``None`` clear) the job's streaming checkpoint."""
    blob = encode_continuation(c) if c is not None else None
    await tx.execute(
        "UPDATE jobs SET continuation = ?, updated_at = ? WHERE job_id = ?", blob, now_us, job_id
    )


async def abandon_stream(tx: Tx, job_id: bytes, now_us: int, blob: bytes | None) -> int | None:
    """Close the rows of a job's checkpointed stream (``blob``, read under the job row's
    lock), if it has one; returns its pinned tx. Node versions the stream closed get back the
    end their own version had (``NULL`` while current, or the tx of a later write that closed
    the stream's row), then every row of the stream is closed at its own start: visible at
    no time (docs/architecture.md, "Streaming")."""
    if blob is None:
        return None
    tx_pin = decode_continuation(blob).tx
    row = await tx.fetchone("SELECT scope_id, source_id FROM jobs WHERE job_id = ?", job_id)
    assert row is not None
    sid, source_id = row
    await tx.execute(
        "UPDATE nodes SET tx_to = (SELECT s.tx_to FROM nodes s WHERE s.scope_id = nodes.scope_id"
        " AND s.node_id = nodes.node_id AND s.tx_from = ?)"
        " WHERE scope_id = ? AND tx_to = ? AND tx_from <> ?",
        tx_pin, sid, tx_pin, tx_pin,
    )  # fmt: skip
    # The closed half first: the open half's rows, once closed, would match it too.
    for half in reversed(tx.dialect.version_halves()):
        await tx.execute(
            "UPDATE nodes SET tx_to = tx_from WHERE scope_id = ? AND source_id = ? AND tx_from = ?"
            + half,
            sid, source_id, tx_pin,
        )  # fmt: skip
    await tx.execute(
        "UPDATE edges SET tx_to = tx_from WHERE scope_id = ? AND tx_from = ? AND tx_to IS NULL",
        sid, tx_pin,
    )  # fmt: skip
    await store_continuation(tx, job_id, None, now_us)
    await add_event(tx, job_id, now_us, "stream_abandoned", f"version {tx_pin} left unfinalized")
    return tx_pin


async def complete(tx: Tx, sid: int, c: JobCompletion, detail: str | None) -> tuple[str, ...]:
    """Complete a held job: its child jobs (each with request-level dedup, naming the
    parent), state, stats and the ``completed`` event. A child whose content is blocklisted
    is refused (a ``child_refused`` event; the parent proceeds); returns the refused
    children's names. Children are enqueued while the parent is still leased, so a
    fetch-format child naming the parent's own ``(source, format)`` is deduplicated against
    the parent: a fetch never queues itself again. With children, the job's ``stats.children``
    is the number of new jobs they made (deduplicated and refused ones not counted)."""
    parent = f"parent={id_str(c.lease.job_id)}"
    refused: list[str] = []
    enqueued = 0
    for child in c.children:
        outcome = await enqueue(
            tx, sid, child, c.now_us, dedup=True, detail=parent, parent=c.lease.job_id
        )
        if outcome.erased:
            refused.append(payload_name(child.payload))
            detail_ = f"{refused[-1]}: content erased"
            await add_event(tx, c.lease.job_id, c.now_us, "child_refused", detail_)
        elif not outcome.deduplicated:
            enqueued += 1
    stats = with_children(c.stats, enqueued) if c.children else c.stats
    await tx.execute(COMPLETE_JOB, stats, c.now_us, c.lease.job_id)
    await add_event(tx, c.lease.job_id, c.now_us, "completed", detail)
    await job_ended(tx, c.lease.job_id, "completed", c.now_us)
    return tuple(refused)


async def scrub_job(tx: Tx, job_id: bytes) -> int:
    """Empty a job payload's inline content (``content_b64``); returns the raw bytes it
    held."""
    row = await tx.fetchone("SELECT payload FROM jobs WHERE job_id = ?", job_id)
    scrubbed = scrub_payload(row[0]) if row is not None and row[0] is not None else None
    if scrubbed is None:
        return 0
    await tx.execute("UPDATE jobs SET payload = ? WHERE job_id = ?", scrubbed[0], job_id)
    return scrubbed[1]


async def end_dead(tx: Tx, job_id: bytes, now_us: int, reason: str) -> None:
    """The move to ``dead``: state, ``failure_reason``, lease and checkpoint cleared, the
    ``dead`` event and webhook deliveries written (the caller locked the row)."""
    await tx.execute(
        "UPDATE jobs SET state = 'dead', failure_reason = ?, lease_owner = NULL,"
        " lease_deadline = NULL, continuation = NULL, updated_at = ? WHERE job_id = ?",
        reason, now_us, job_id,
    )  # fmt: skip
    await add_event(tx, job_id, now_us, "dead", reason)
    await job_ended(tx, job_id, "dead", now_us)


async def end_erased(tx: Tx, job_id: bytes, now_us: int, reason: str) -> None:
    """End a job ``dead`` with ``reason`` (an ``erased: …`` reason): its stream (if any) is
    closed and its payload loses its inline content. Locks the job row if the caller has
    not."""
    row = await tx.fetchone(
        f"SELECT continuation FROM jobs WHERE job_id = ?{tx.for_update}", job_id
    )
    await abandon_stream(tx, job_id, now_us, row[0] if row is not None else None)
    await end_dead(tx, job_id, now_us, reason)
    await scrub_job(tx, job_id)


async def _write_failure(
    tx: Tx,
    job_id: bytes,
    fmt: str,
    d: FailureDecision,
    reason: str,
    now_us: int,
    continuation: bytes | None,
) -> None:
    await abandon_stream(tx, job_id, now_us, continuation)
    await tx.execute(
        "UPDATE jobs SET state = ?, attempts = ?, available_at = ?, failure_reason = ?,"
        " lease_owner = NULL, lease_deadline = NULL, updated_at = ? WHERE job_id = ?",
        d.state, d.attempts, d.available_at, d.reason or reason, now_us, job_id,
    )  # fmt: skip
    if d.state == "pending":
        await tx.notify(fmt)
    else:
        await job_ended(tx, job_id, d.state, now_us)


async def _apply_loss(
    tx: Tx,
    job: JobRecord,
    kind: str,
    reason: str,
    now_us: int,
    decide: DecideLoss,
    continuation: bytes | None,
) -> FailureDecision:
    """A job lost with its worker (``kind``: ``worker_lost`` or ``lease_expired``; the caller
    holds the row): its loss event, then the decision (counting its earlier losses) and a
    ``dead`` event if dead."""
    row = await tx.fetchone(_LOSSES_SQL, job.job_id)
    losses = int(row[0]) if row is not None else 0
    d = decide(kind, job.attempts, losses)
    await _write_failure(tx, job.job_id, job.format, d, reason, now_us, continuation)
    await add_event(tx, job.job_id, now_us, kind, f"{reason} (loss {losses + 1})")
    if d.state == "dead":
        await add_event(tx, job.job_id, now_us, "dead", d.reason or reason)
    return d


async def lease(
    tx: Tx,
    formats: Sequence[str],
    scope: Scope | None,
    worker_id: str,
    now_us: int,
    lease_us: int,
) -> JobRecord | None:
    """Lease the next available pending job of ``formats`` (of ``scope`` only, unless
    ``None``), picked fairly across scopes (:func:`telha.storage.jobs.fair_lease.pick`: the
    least recently leased scope first, then its oldest job): state ``leased``, generation + 1,
    deadline ``now_us + lease_us``, a ``leased`` event, the scope's head moved to the back.
    On PostgreSQL the candidate is locked with ``SKIP LOCKED``: a job another transaction is
    leasing is passed over, never leased twice."""
    sid: int | None = None
    if scope is not None:
        sid = await tx.known_scope_id(scope)
        if sid is None:
            raise Rollback(None)
    picked = await fair_lease.pick(tx, formats, sid, now_us)
    if picked is None:
        raise Rollback(None)
    job_id, head_sid, fmt = picked
    await fair_lease.touch(tx, head_sid, fmt, now_us)
    sql = f"{LEASE_JOB} RETURNING {JOB_RETURNING}"
    (row,) = await tx.fetchall(sql, worker_id, now_us + lease_us, now_us, job_id)
    await add_event(tx, job_id, now_us, "leased", f"worker={worker_id}")
    return job_record(row)


async def heartbeat(tx: Tx, leases: Sequence[LeaseRef], now_us: int, lease_us: int) -> list[bytes]:
    """Extend the leases still held under the given generations; returns their ids, each
    once, in the order given. Rows are updated in id order (the order every multi-job write
    locks them in, so two never wait on each other)."""
    extended = set()
    for held in sorted(leases, key=lambda lease: (lease.job_id, lease.lease_generation)):
        n = await tx.execute(
            "UPDATE jobs SET lease_deadline = ?, updated_at = ? WHERE job_id = ?"
            " AND state = 'leased' AND lease_generation = ?",
            now_us + lease_us, now_us, held.job_id, held.lease_generation,
        )  # fmt: skip
        if n:
            extended.add(held.job_id)
    return [job_id for job_id in dict.fromkeys(h.job_id for h in leases) if job_id in extended]


async def fail(
    tx: Tx, held: LeaseRef, kind: str, reason: str, now_us: int, decide: Decide
) -> JobRecord:
    """Record a failed attempt of a held job: back to pending (retried) or dead.

    :raises StaleLease: the caller does not hold the job.
    """
    attempts, fmt, cont = await check_lease(tx, held)
    d = decide(kind, attempts)
    await _write_failure(tx, held.job_id, fmt, d, reason, now_us, cont)
    await add_event(tx, held.job_id, now_us, "dead" if d.state == "dead" else "retried", reason)
    return await select_job(tx, held.job_id)


async def release(tx: Tx, held: LeaseRef, now_us: int, detail: str) -> bool:
    """Give a held job back (shutdown): pending at once, the attempt not counted; ``False``
    (nothing written) when the lease is no longer held."""
    try:
        _, fmt, cont = await check_lease(tx, held)
    except StaleLease:
        raise Rollback(False) from None
    await tx.execute(
        "UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_deadline = NULL,"
        " available_at = ?, updated_at = ? WHERE job_id = ?",
        now_us, now_us, held.job_id,
    )  # fmt: skip
    await abandon_stream(tx, held.job_id, now_us, cont)
    await add_event(tx, held.job_id, now_us, "released", detail)
    await tx.notify(fmt)
    return True


async def reap(tx: Tx, now_us: int, decide: DecideLoss) -> list[tuple[JobRecord, str]]:
    """Expired leases back to pending (a failed attempt, ``lease_expired``) or dead; returns
    ``(job as it was when reaped, new state)`` per job. On PostgreSQL at most 500 rows a
    pass, locked with ``SKIP LOCKED`` (one being committed, or reaped by another replica, is
    left to that transaction) and their deadline read on the locked row.

    :raises RowFault: an expired job's row cannot be processed (its streaming checkpoint
        does not decode, its scope is gone…): nothing was written; once it is recorded
        (:meth:`~telha.storage.core.operations.SharedOps.fail_row`) the next pass goes on
        without it (docs/architecture.md, "Supervision and bad rows").
    """
    lock = tx.dialect.expired_leases_batch
    expired = await tx.fetchall(
        f"SELECT j.job_id FROM jobs j WHERE j.state = 'leased' AND j.lease_deadline < ?{lock}",
        now_us,
    )
    if not expired:
        raise Rollback([])
    reaped: list[tuple[JobRecord, str]] = []
    for (job_id,) in expired:
        with per_row(tx, "job", job_id):
            row = await tx.fetchone(
                f"SELECT {JOB_COLS}, j.continuation{JOB_FROM} WHERE j.job_id = ?", job_id
            )
            if row is None:
                raise LookupError("the job's scope is gone")
            job = job_record(row[:-1])
            reason = f"lease_expired: lease of worker {job.lease_owner} ran out"
            d = await _apply_loss(tx, job, "lease_expired", reason, now_us, decide, row[-1])
        reaped.append((job, d.state))
    return reaped


async def lose(
    tx: Tx, leases: Sequence[LeaseRef], now_us: int, detail: str, decide: DecideLoss
) -> list[tuple[JobRecord, str]]:
    """Jobs lost with their worker: ``worker_lost``, a failed attempt, pending or dead per
    ``decide``; leases no longer held are skipped. Rows are locked in id order.

    :raises RowFault: a lost job's row cannot be processed (as :func:`reap`).
    """
    lost: list[tuple[JobRecord, str]] = []
    for held in sorted(leases, key=lambda lease: lease.job_id):
        try:
            _, _, cont = await check_lease(tx, held)
        except StaleLease:
            continue
        with per_row(tx, "job", held.job_id):
            job = await select_job(tx, held.job_id)
            reason = f"worker_lost: {detail}"
            d = await _apply_loss(tx, job, "worker_lost", reason, now_us, decide, cont)
        lost.append((job, d.state))
    if not lost:
        raise Rollback([])
    return lost
