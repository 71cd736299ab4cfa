"""Job helpers of the SQLite engine's own write paths (the erasure): events, the lease
fence, enqueue with request-level dedup, completion, a stream's abandonment and the end of
an erased job, each inside the writer's current transaction. The job operations themselves
are :mod:`telha.storage.core.jobs`, written once for both engines.
"""

from __future__ import annotations

import sqlite3

from telha.domain.erasure import payload_name, scrub_payload
from telha.domain.errors import StaleLease
from telha.domain.ids import id_str
from telha.domain.model import Continuation, EnqueueOutcome, JobCompletion, LeaseRef, NewJob
from telha.domain.records import decode_continuation, encode_continuation
from telha.storage.sqlite.base import blocked, latest_hashes

__all__ = [
    "abandon_stream",
    "add_event",
    "check_lease",
    "complete_tx",
    "end_erased",
    "enqueue_tx",
    "scrub_job",
    "store_continuation",
]


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
