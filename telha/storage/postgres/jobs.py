"""Job helpers of the PostgreSQL engine's own write paths (the erasure): events, the lease
fence, enqueue through ``telha_enqueue``, completion, a stream's abandonment and the end of
an erased job. The job operations themselves are :mod:`telha.storage.core.jobs`, written
once for both engines.

Every helper runs inside the caller's transaction; the lease fence locks the job row, and
enqueue holds the ``(scope, source)`` advisory lock while it checks request-level dedup.
"""

from __future__ import annotations

from telha.domain.erasure import payload_name, scrub_payload
from telha.domain.errors import StaleLease
from telha.domain.ids import id_str
from telha.domain.model import Continuation, EnqueueOutcome, JobCompletion, LeaseRef, NewJob
from telha.domain.records import decode_continuation, encode_continuation
from telha.storage.postgres.tx import CHANNEL, Conn, source_lock_key

__all__ = [
    "CHANNEL",
    "abandon_stream",
    "add_event",
    "check_lease",
    "complete_tx",
    "end_erased",
    "enqueue_tx",
    "scrub_job",
    "store_continuation",
]


async def add_event(
    conn: Conn, job_id: bytes, at: int, transition: str, detail: str | None
) -> None:
    """Append one event to a job's event list (inside the current transaction, which holds the
    job row's lock, so two events of one job never race for a seq)."""
    await conn.execute(
        "INSERT INTO job_events (job_id, seq, at, transition, detail) VALUES ($1,"
        " (SELECT coalesce(max(seq), 0) + 1 FROM job_events WHERE job_id = $1), $2, $3, $4)",
        job_id,
        at,
        transition,
        detail,
    )


async def check_lease(conn: Conn, lease: LeaseRef) -> tuple[int, str, bytes | None]:
    """Lock the held job's row and return its ``(attempts, format, continuation)``.

    The lock lasts until the transaction ends: the reaper, a heartbeat or another submission
    of the same job waits for it, so the generation checked here is the one the write is
    committed under.

    :raises StaleLease: the job is not leased under ``lease.lease_generation``.
    """
    row = await conn.fetchrow(
        "SELECT attempts, format, state, lease_generation, continuation FROM jobs"
        " WHERE job_id = $1 FOR UPDATE",
        lease.job_id,
    )
    if row is None or row[2] != "leased" or row[3] != lease.lease_generation:
        raise StaleLease("job is not leased under this lease generation")
    return int(row[0]), str(row[1]), row[4]


async def enqueue_tx(
    conn: Conn, sid: int, job: NewJob, now_us: int, *, dedup: bool, detail: str | None = None
) -> EnqueueOutcome:
    """Insert a pending job (its ``enqueued`` event, a NOTIFY) inside the current transaction,
    through ``telha_enqueue`` (migrations 0002–0004; the one place its rules live): a content
    hash on the scope's erasure blocklist is refused first (``erased``, nothing written); with
    ``dedup``, request-level dedup under the source's advisory lock — against the latest
    version and an active job of the same ``(source, hash)``, or, for a fetch format without a
    hash, an active job of the same ``(source, format)``."""
    row = await conn.fetchrow(
        "SELECT deduplicated, job_id, erased FROM telha_enqueue($1, $2, $3, $4, $5, $6, $7, $8,"
        " $9, $10, $11, $12)",
        job.job_id, sid, job.kind, job.format, job.source_id, job.content_hash, job.payload,
        now_us, dedup, detail, source_lock_key(sid, job.source_id), CHANNEL,
    )  # fmt: skip
    assert row is not None
    return EnqueueOutcome(bool(row[0]), row[1], bool(row[2]))


async def store_continuation(
    conn: Conn, job_id: bytes, c: Continuation | None, now_us: int
) -> None:
    """Write (or with ``None`` clear) the job's streaming checkpoint."""
    blob = encode_continuation(c) if c is not None else None
    await conn.execute(
        "UPDATE jobs SET continuation = $1, updated_at = $2 WHERE job_id = $3", blob, now_us, job_id
    )


async def abandon_stream(conn: Conn, job_id: bytes, now_us: int, blob: bytes | None) -> int | None:
    """Close the rows of a job's checkpointed stream (``blob``, read under the job row's
    lock), if it has one; returns its pinned tx. Same rules as the SQLite engine: versions the
    stream closed get back the end their own version had, then every row of the stream is
    closed at its own start (visible at no time)."""
    if blob is None:
        return None
    cont = decode_continuation(blob)
    row = await conn.fetchrow("SELECT scope_id, source_id FROM jobs WHERE job_id = $1", job_id)
    assert row is not None
    sid, source_id, tx = row[0], row[1], cont.tx
    await conn.execute(
        "UPDATE nodes SET tx_to = s.tx_to FROM nodes s WHERE nodes.scope_id = $1"
        " AND nodes.tx_to = $2 AND nodes.tx_from <> $2 AND s.scope_id = nodes.scope_id"
        " AND s.node_id = nodes.node_id AND s.tx_from = $2",
        sid,
        tx,
    )
    # A closed version whose stream row is absent (never written) keeps the SQL NULL rule of
    # the SQLite engine: its end becomes NULL (current again).
    await conn.execute(
        "UPDATE nodes SET tx_to = NULL WHERE scope_id = $1 AND tx_to = $2 AND tx_from <> $2"
        " AND NOT EXISTS (SELECT 1 FROM nodes s WHERE s.scope_id = nodes.scope_id"
        " AND s.node_id = nodes.node_id AND s.tx_from = $2)",
        sid,
        tx,
    )
    await conn.execute(
        "UPDATE nodes SET tx_to = tx_from WHERE scope_id = $1 AND source_id = $2 AND tx_from = $3",
        sid,
        source_id,
        tx,
    )
    await conn.execute(
        "UPDATE edges SET tx_to = tx_from WHERE scope_id = $1 AND tx_from = $2 AND tx_to IS NULL",
        sid,
        tx,
    )
    await store_continuation(conn, job_id, None, now_us)
    await add_event(conn, job_id, now_us, "stream_abandoned", f"version {tx} left unfinalized")
    return tx


async def complete_tx(
    conn: Conn, sid: int, c: JobCompletion, detail: str | None
) -> tuple[str, ...]:
    """Complete a held job inside the current transaction: state, stats, its child jobs
    (each with request-level dedup, naming its parent) and the ``completed`` event. A child
    whose content is blocklisted is refused (a ``child_refused`` event; the parent
    proceeds); returns the refused children's names."""
    parent = f"parent={id_str(c.lease.job_id)}"
    refused = []
    for child in c.children:
        if (await enqueue_tx(conn, sid, child, c.now_us, dedup=True, detail=parent)).erased:
            refused.append(payload_name(child.payload))
            await add_event(
                conn, c.lease.job_id, c.now_us, "child_refused", f"{refused[-1]}: content erased"
            )
    # One statement: the state and the ``completed`` event (under the row lock the caller's
    # lease check holds).
    await conn.execute(
        "WITH u AS (UPDATE jobs SET state = 'completed', lease_owner = NULL,"
        " lease_deadline = NULL, stats = $1, continuation = NULL, updated_at = $2"
        " WHERE job_id = $3)"
        " INSERT INTO job_events (job_id, seq, at, transition, detail) VALUES ($3,"
        " (SELECT coalesce(max(seq), 0) + 1 FROM job_events WHERE job_id = $3), $2,"
        " 'completed', $4)",
        c.stats,
        c.now_us,
        c.lease.job_id,
        detail,
    )
    return tuple(refused)


async def scrub_job(conn: Conn, job_id: bytes) -> int:
    """Empty a job payload's inline content (``content_b64``); returns the raw bytes it held."""
    payload = await conn.fetchval("SELECT payload FROM jobs WHERE job_id = $1", job_id)
    scrubbed = scrub_payload(payload) if payload is not None else None
    if scrubbed is None:
        return 0
    await conn.execute("UPDATE jobs SET payload = $1 WHERE job_id = $2", scrubbed[0], job_id)
    return scrubbed[1]


async def end_erased(conn: Conn, job_id: bytes, now_us: int, reason: str) -> None:
    """End a job ``dead`` with ``reason`` (an ``erased: …`` reason) inside the current
    transaction (which must hold the job row's lock or take it here): its stream (if any) is
    closed and its payload loses its inline content."""
    cont = await conn.fetchval("SELECT continuation FROM jobs WHERE job_id = $1 FOR UPDATE", job_id)
    await abandon_stream(conn, job_id, now_us, cont)
    await conn.execute(
        "UPDATE jobs SET state = 'dead', failure_reason = $1, lease_owner = NULL,"
        " lease_deadline = NULL, continuation = NULL, updated_at = $2 WHERE job_id = $3",
        reason,
        now_us,
        job_id,
    )
    await add_event(conn, job_id, now_us, "dead", reason)
    await scrub_job(conn, job_id)
