"""Job rows and events on SQLite (DESIGN.md §4, §6): enqueue with request-level dedup, lease,
heartbeat, fail, release, reap. Every operation is one write transaction, run whole on the
writer's thread (:meth:`SqliteBase._write`); the functions named ``*_tx`` run there.

Mixed into :class:`~telha.storage.sqlite.store.SqliteStore`; the retry policy itself is pure
(:mod:`telha.domain.policy`) and arrives as a callable, so the engine picks no outcomes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from telha.domain.erasure import payload_name, scrub_payload
from telha.domain.errors import StaleLease
from telha.domain.ids import id_str
from telha.domain.model import (
    Continuation,
    EnqueueOutcome,
    JobCompletion,
    JobEvent,
    JobRecord,
    LeaseRef,
    NewJob,
    Scope,
)
from telha.domain.policy import LOSS_KINDS, Decide, DecideLoss, FailureDecision
from telha.domain.records import decode_continuation, encode_continuation
from telha.domain.records import job_record as _job
from telha.storage.sqlite.base import SqliteBase, blocked, latest_hashes

__all__ = [
    "JobsMixin",
    "abandon_stream",
    "add_event",
    "check_lease",
    "complete_tx",
    "decode_continuation",
    "end_erased",
    "enqueue_tx",
    "load_continuation",
    "scrub_job",
    "store_continuation",
]

_JOB_COLS = (
    "j.job_id, s.tenant_id, s.organization_id, j.kind, j.format, j.source_id, j.content_hash,"
    " j.payload, j.state, j.attempts, j.lease_generation, j.lease_owner, j.lease_deadline,"
    " j.available_at, j.failure_reason, j.stats"
)
_FROM = " FROM jobs j JOIN scopes s ON s.scope_id = j.scope_id"


def add_event(
    conn: sqlite3.Connection, job_id: bytes, at: int, transition: str, detail: str | None
) -> None:
    """Append one event to a job's event list (inside the current transaction)."""
    conn.execute(
        "INSERT INTO job_events (job_id, seq, at, transition, detail) VALUES (?,"
        " (SELECT coalesce(max(seq), 0) + 1 FROM job_events WHERE job_id = ?), ?, ?, ?)",
        (job_id, job_id, at, transition, detail),
    )


def check_lease(conn: sqlite3.Connection, lease: LeaseRef) -> tuple[int, str]:
    """The held job's ``(attempts, format)``.

    :raises StaleLease: the job is not leased under ``lease.lease_generation``.
    """
    row = conn.execute(
        "SELECT attempts, format, state, lease_generation FROM jobs WHERE job_id = ?",
        (lease.job_id,),
    ).fetchone()
    if row is None or row[2] != "leased" or row[3] != lease.lease_generation:
        raise StaleLease("job is not leased under this lease generation")
    return int(row[0]), str(row[1])


def _active_dedup(conn: sqlite3.Connection, sid: int, job: NewJob) -> EnqueueOutcome | None:
    latest = latest_hashes(conn, sid, job.source_id)
    if latest is not None and latest[0] == job.content_hash:
        return EnqueueOutcome(True, None)
    active = conn.execute(
        "SELECT job_id FROM jobs WHERE scope_id = ? AND source_id = ? AND content_hash = ?"
        " AND state IN ('pending', 'leased') ORDER BY created_at LIMIT 1",
        (sid, job.source_id, job.content_hash),
    ).fetchone()
    return EnqueueOutcome(True, active[0]) if active is not None else None


def enqueue_tx(
    conn: sqlite3.Connection,
    sid: int,
    job: NewJob,
    now_us: int,
    *,
    dedup: bool,
    detail: str | None = None,
) -> EnqueueOutcome:
    """Insert a pending job (and its ``enqueued`` event) inside the current transaction; with
    ``dedup`` (and a content hash), request-level dedup against the latest version and an
    active job of the same ``(source, hash)``. A fetch-format job (``web``: no content hash)
    with ``dedup`` — a crawl's child — is deduplicated against an active job fetching the
    same name (source) instead: what it would fetch is not known yet. A content hash on the
    scope's erasure blocklist is refused before any dedup (``erased``, nothing written)."""
    if job.content_hash is not None and blocked(conn, sid, [job.content_hash]):
        return EnqueueOutcome(False, None, erased=True)
    if dedup and job.content_hash is not None:
        outcome = _active_dedup(conn, sid, job)
        if outcome is not None:
            return outcome
    elif dedup:
        active = conn.execute(
            "SELECT job_id FROM jobs WHERE scope_id = ? AND source_id = ? AND format = ?"
            " AND content_hash IS NULL AND state IN ('pending', 'leased') LIMIT 1",
            (sid, job.source_id, job.format),
        ).fetchone()
        if active is not None:
            return EnqueueOutcome(True, active[0])
    conn.execute(
        "INSERT INTO jobs (job_id, scope_id, kind, format, source_id, content_hash,"
        " payload, state, available_at, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
        (job.job_id, sid, job.kind, job.format, job.source_id, job.content_hash,
         job.payload, now_us, now_us, now_us),
    )  # fmt: skip
    add_event(conn, job.job_id, now_us, "enqueued", detail)
    return EnqueueOutcome(False, job.job_id)


def load_continuation(conn: sqlite3.Connection, job_id: bytes) -> Continuation | None:
    """The job's streaming checkpoint, if it has one (msgpack of :class:`Continuation`)."""
    row = conn.execute("SELECT continuation FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    return decode_continuation(row[0])


def store_continuation(
    conn: sqlite3.Connection, job_id: bytes, c: Continuation | None, now_us: int
) -> None:
    """Write (or with ``None`` clear) the job's streaming checkpoint."""
    blob = encode_continuation(c) if c is not None else None
    conn.execute(
        "UPDATE jobs SET continuation = ?, updated_at = ? WHERE job_id = ?", (blob, now_us, job_id)
    )


def abandon_stream(conn: sqlite3.Connection, job_id: bytes, now_us: int) -> int | None:
    """Close the rows of a job's checkpointed stream, if it has one; returns its pinned tx.

    Runs inside the current write transaction (a failure, a re-lease, a single-shot retry).
    """
    cont = load_continuation(conn, job_id)
    if cont is None:
        return None
    row = conn.execute(
        "SELECT scope_id, source_id FROM jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    sid, source_id, tx = row[0], row[1], cont.tx
    # Versions the stream closed get back the end its own version had (NULL while current,
    # or the tx of a later write that closed the stream's row), then every row of the
    # stream is closed at its own start: visible at no time.
    conn.execute(
        "UPDATE nodes SET tx_to = (SELECT s.tx_to FROM nodes s WHERE s.scope_id = nodes.scope_id"
        " AND s.node_id = nodes.node_id AND s.tx_from = ?)"
        " WHERE scope_id = ? AND tx_to = ? AND tx_from <> ?",
        (tx, sid, tx, tx),
    )
    conn.execute(
        "UPDATE nodes SET tx_to = tx_from WHERE scope_id = ? AND source_id = ? AND tx_from = ?",
        (sid, source_id, tx),
    )
    conn.execute(
        "UPDATE edges SET tx_to = tx_from WHERE scope_id = ? AND tx_from = ? AND tx_to IS NULL",
        (sid, tx),
    )
    store_continuation(conn, job_id, None, now_us)
    add_event(conn, job_id, now_us, "stream_abandoned", f"version {tx} left unfinalized")
    return tx


def complete_tx(
    conn: sqlite3.Connection, sid: int, c: JobCompletion, detail: str | None
) -> tuple[str, ...]:
    """Complete a held job inside the current transaction: state, stats, its child jobs
    (each with request-level dedup, naming its parent) and the ``completed`` event. A child
    whose content is blocklisted is refused (a ``child_refused`` event; the parent
    proceeds); returns the refused children's names."""
    conn.execute(
        "UPDATE jobs SET state = 'completed', lease_owner = NULL, lease_deadline = NULL,"
        " stats = ?, continuation = NULL, updated_at = ? WHERE job_id = ?",
        (c.stats, c.now_us, c.lease.job_id),
    )
    parent = f"parent={id_str(c.lease.job_id)}"
    refused = []
    for child in c.children:
        if enqueue_tx(conn, sid, child, c.now_us, dedup=True, detail=parent).erased:
            refused.append(payload_name(child.payload))
            detail_ = f"{refused[-1]}: content erased"
            add_event(conn, c.lease.job_id, c.now_us, "child_refused", detail_)
    add_event(conn, c.lease.job_id, c.now_us, "completed", detail)
    return tuple(refused)


def scrub_job(conn: sqlite3.Connection, job_id: bytes) -> int:
    """Empty a job payload's inline content (``content_b64``); returns the raw bytes it held."""
    row = conn.execute("SELECT payload FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    scrubbed = scrub_payload(row[0]) if row is not None else None
    if scrubbed is None:
        return 0
    conn.execute("UPDATE jobs SET payload = ? WHERE job_id = ?", (scrubbed[0], job_id))
    return scrubbed[1]


def end_erased(conn: sqlite3.Connection, job_id: bytes, now_us: int, reason: str) -> None:
    """End a job ``dead`` with ``reason`` (an ``erased: …`` reason) inside the current
    transaction: its stream (if any) is closed and its payload loses its inline content."""
    abandon_stream(conn, job_id, now_us)
    conn.execute(
        "UPDATE jobs SET state = 'dead', failure_reason = ?, lease_owner = NULL,"
        " lease_deadline = NULL, continuation = NULL, updated_at = ? WHERE job_id = ?",
        (reason, now_us, job_id),
    )
    add_event(conn, job_id, now_us, "dead", reason)
    scrub_job(conn, job_id)


def _apply_failure(
    conn: sqlite3.Connection,
    job_id: bytes,
    kind: str,
    reason: str,
    attempts: int,
    now_us: int,
    decide: Decide,
) -> FailureDecision:
    d = decide(kind, attempts)
    _write_failure(conn, job_id, d, reason, now_us)
    add_event(conn, job_id, now_us, "dead" if d.state == "dead" else "retried", reason)
    return d


def _write_failure(
    conn: sqlite3.Connection, job_id: bytes, d: FailureDecision, reason: str, now_us: int
) -> None:
    abandon_stream(conn, job_id, now_us)
    conn.execute(
        "UPDATE jobs SET state = ?, attempts = ?, available_at = ?, failure_reason = ?,"
        " lease_owner = NULL, lease_deadline = NULL, updated_at = ? WHERE job_id = ?",
        (d.state, d.attempts, d.available_at, d.reason or reason, now_us, job_id),
    )


_LOSSES_SQL = (
    "SELECT count(*) FROM job_events WHERE job_id = ? AND transition IN ("
    + ", ".join(f"'{k}'" for k in sorted(LOSS_KINDS))
    + ")"
)


def _apply_loss(
    conn: sqlite3.Connection,
    job_id: bytes,
    kind: str,
    reason: str,
    attempts: int,
    now_us: int,
    decide: DecideLoss,
) -> FailureDecision:
    """A job lost with its worker (``kind``: ``worker_lost`` or ``lease_expired``): its loss
    event, then the decision (counting its earlier losses) and a ``dead`` event if dead."""
    losses = int(conn.execute(_LOSSES_SQL, (job_id,)).fetchone()[0])
    d = decide(kind, attempts, losses)
    _write_failure(conn, job_id, d, reason, now_us)
    add_event(conn, job_id, now_us, kind, f"{reason} (loss {losses + 1})")
    if d.state == "dead":
        add_event(conn, job_id, now_us, "dead", d.reason or reason)
    return d


def _select_job(conn: sqlite3.Connection, job_id: bytes) -> JobRecord:
    row = conn.execute(f"SELECT {_JOB_COLS}{_FROM} WHERE j.job_id = ?", (job_id,)).fetchone()
    return _job(row)


class JobsMixin(SqliteBase):
    """Job operations of the SQLite engine; see :class:`telha.storage.protocol.Storage`."""

    async def enqueue_job(
        self, scope: Scope, job: NewJob, *, now_us: int, dedup: bool
    ) -> EnqueueOutcome:
        """Insert a pending job, unless (with ``dedup``) the source's latest version already has
        ``job.content_hash`` or a pending/leased job covers the same ``(source, hash)``."""

        def tx(conn: sqlite3.Connection) -> EnqueueOutcome:
            outcome = enqueue_tx(conn, self._tx_scope_id(conn, scope), job, now_us, dedup=dedup)
            if outcome.deduplicated or outcome.erased:
                conn.execute("ROLLBACK")
            return outcome

        return await self._write("enqueue job", tx)

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
        params: list[Any] = [worker_id, now_us + lease_us, now_us, *formats, now_us]
        scope_sql = ""
        if scope is not None:
            sid = await self._scope_id(scope)
            if sid is None:
                return None
            scope_sql = " AND scope_id = ?"
            params.append(sid)
        sql = (
            "UPDATE jobs SET state = 'leased', lease_generation = lease_generation + 1,"
            " lease_owner = ?, lease_deadline = ?, updated_at = ? WHERE job_id = ("
            f"SELECT job_id FROM jobs WHERE state = 'pending' AND format IN ({marks})"
            f" AND available_at <= ?{scope_sql} ORDER BY available_at, job_id LIMIT 1)"
            " RETURNING job_id"
        )

        def tx(conn: sqlite3.Connection) -> JobRecord | None:
            row = conn.execute(sql, params).fetchone()
            if row is None:
                conn.execute("ROLLBACK")
                return None
            add_event(conn, row[0], now_us, "leased", f"worker={worker_id}")
            return _select_job(conn, row[0])

        return await self._write("lease job", tx)

    def job_wakeups(self) -> None:
        """No cross-process wake-ups: one ``telha serve`` owns an SQLite file, and its
        in-process wake-ups see every enqueue (see :meth:`Storage.job_wakeups`)."""
        return None

    async def next_available_at(
        self, formats: Sequence[str], scope: Scope | None = None
    ) -> int | None:
        """Earliest ``available_at`` (µs) of a pending job of ``formats`` (in ``scope`` only,
        unless ``None``), or ``None``."""
        if not formats:
            return None
        marks = ",".join("?" * len(formats))
        sql = f"SELECT min(available_at) FROM jobs WHERE state = 'pending' AND format IN ({marks})"
        params: tuple[Any, ...] = tuple(formats)
        if scope is not None:
            sid = await self._scope_id(scope)
            if sid is None:
                return None
            sql += " AND scope_id = ?"
            params += (sid,)
        rows = await self._fetchall(sql, params)
        return rows[0][0] if rows and rows[0][0] is not None else None

    async def active_job_counts(self) -> dict[tuple[str, str], int]:
        """``{(kind, state): n}`` for ``pending`` and ``leased`` jobs (each state counted
        through its partial index); absent pairs have no jobs."""
        rows = await self._fetchall(
            "SELECT kind, 'pending', count(*) FROM jobs WHERE state = 'pending' GROUP BY kind"
            " UNION ALL"
            " SELECT kind, 'leased', count(*) FROM jobs WHERE state = 'leased' GROUP BY kind",
            (),
        )
        return {(str(kind), str(state)): int(n) for kind, state, n in rows}

    async def heartbeat_jobs(
        self, leases: Sequence[LeaseRef], *, now_us: int, lease_us: int
    ) -> list[bytes]:
        """Extend the leases still held under the given generations; returns their ids."""

        def tx(conn: sqlite3.Connection) -> list[bytes]:
            extended = []
            for lease in leases:
                cur = conn.execute(
                    "UPDATE jobs SET lease_deadline = ?, updated_at = ? WHERE job_id = ?"
                    " AND state = 'leased' AND lease_generation = ?",
                    (now_us + lease_us, now_us, lease.job_id, lease.lease_generation),
                )
                if cur.rowcount:
                    extended.append(lease.job_id)
            return extended

        return await self._write("extend leases", tx) if leases else []

    async def fail_job(
        self, lease: LeaseRef, kind: str, reason: str, *, now_us: int, decide: Decide
    ) -> JobRecord:
        """Record a failed attempt of a held job: back to pending (retried) or dead.

        :raises StaleLease: the caller does not hold the job.
        """

        def tx(conn: sqlite3.Connection) -> JobRecord:
            attempts, _ = check_lease(conn, lease)
            _apply_failure(conn, lease.job_id, kind, reason, attempts, now_us, decide)
            return _select_job(conn, lease.job_id)

        return await self._write("record failure", tx)

    async def release_job(self, lease: LeaseRef, *, now_us: int, detail: str) -> bool:
        """Give a held job back (shutdown): pending at once, the attempt not counted."""

        def tx(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_deadline = NULL,"
                " available_at = ?, updated_at = ? WHERE job_id = ? AND state = 'leased'"
                " AND lease_generation = ?",
                (now_us, now_us, lease.job_id, lease.lease_generation),
            )
            if cur.rowcount:
                abandon_stream(conn, lease.job_id, now_us)
                add_event(conn, lease.job_id, now_us, "released", detail)
            return bool(cur.rowcount)

        return await self._write("release job", tx)

    async def reap_expired(self, *, now_us: int, decide: DecideLoss) -> list[tuple[JobRecord, str]]:
        """Expired leases back to pending (a failed attempt, ``lease_expired``) or dead.

        :returns: ``(job as it was when reaped, new state)`` per reaped job.
        """

        def tx(conn: sqlite3.Connection) -> list[tuple[JobRecord, str]]:
            rows = conn.execute(
                f"SELECT {_JOB_COLS}{_FROM} WHERE j.state = 'leased' AND j.lease_deadline < ?",
                (now_us,),
            ).fetchall()
            if not rows:
                conn.execute("ROLLBACK")
            reaped: list[tuple[JobRecord, str]] = []
            for row in rows:
                job = _job(row)
                reason = f"lease_expired: lease of worker {job.lease_owner} ran out"
                d = _apply_loss(
                    conn, job.job_id, "lease_expired", reason, job.attempts, now_us, decide
                )
                reaped.append((job, d.state))
            return reaped

        return await self._write("reap leases", tx)

    async def lose_jobs(
        self, leases: Sequence[LeaseRef], *, now_us: int, detail: str, decide: DecideLoss
    ) -> list[tuple[JobRecord, str]]:
        """Jobs lost with their worker: ``worker_lost``, a failed attempt, pending (at once
        for a first loss) or dead per ``decide``; leases no longer held are skipped."""

        def tx(conn: sqlite3.Connection) -> list[tuple[JobRecord, str]]:
            lost: list[tuple[JobRecord, str]] = []
            for lease in leases:
                try:
                    check_lease(conn, lease)
                except StaleLease:
                    continue
                job = _select_job(conn, lease.job_id)
                reason = f"worker_lost: {detail}"
                d = _apply_loss(
                    conn, job.job_id, "worker_lost", reason, job.attempts, now_us, decide
                )
                lost.append((job, d.state))
            if not lost:
                conn.execute("ROLLBACK")
            return lost

        return await self._write("lose jobs", tx) if leases else []

    async def get_job(
        self, scope: Scope | None, job_id: bytes, *, events: bool = True
    ) -> JobRecord | None:
        """A job with its events (oldest first) unless ``events=False``; ``None`` when absent
        or in another scope."""
        rows = await self._fetchall(f"SELECT {_JOB_COLS}{_FROM} WHERE j.job_id = ?", (job_id,))
        if not rows:
            return None
        job = _job(rows[0])
        if scope is not None and job.scope != scope:
            return None
        if not events:
            return job
        found = await self._fetchall(
            "SELECT at, transition, detail FROM job_events WHERE job_id = ? ORDER BY seq",
            (job_id,),
        )
        return _job(rows[0], tuple(JobEvent(*e) for e in found))
