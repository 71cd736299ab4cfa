"""Job rows and events on PostgreSQL (DESIGN.md §4, §6, §9), correct with several replicas on
one database:

- leasing takes the oldest available job with ``FOR UPDATE SKIP LOCKED`` in the transaction
  that marks it leased, so two pollers (of any replicas) never lease the same job;
- every write a lease guards (a submission, a failure, a release, a heartbeat) locks the job
  row and checks the lease generation in the same transaction as the write;
- the reaper locks expired rows with ``SKIP LOCKED`` and re-checks their deadline, so reapers
  of every replica may run at once and each expired lease is reaped once;
- enqueue holds the ``(scope, source)`` advisory lock while it checks request-level dedup;
- a job that becomes available sends ``NOTIFY telha_jobs, '<format>'`` (delivered at commit),
  which wakes pollers on every replica (:meth:`PostgresStore.job_wakeups`).

Mixed into :class:`~telha.storage.postgres.store.PostgresStore`; the retry policy is pure
(:mod:`telha.domain.policy`) and arrives as a callable.
"""

from __future__ import annotations

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
from telha.storage.postgres.base import (
    Conn,
    PgBase,
    Rollback,
    source_lock_key,
)
from telha.storage.postgres.rows import Batch

__all__ = [
    "CHANNEL",
    "JobsMixin",
    "abandon_stream",
    "add_event",
    "check_lease",
    "complete_in_batch",
    "complete_tx",
    "decode_continuation",
    "end_erased",
    "enqueue_tx",
    "notify",
    "scrub_job",
    "store_continuation",
]

#: The LISTEN/NOTIFY channel; the payload is the format whose jobs became available.
CHANNEL = "telha_jobs"

_JOB_COLS = (
    "j.job_id, s.tenant_id, s.organization_id, j.kind, j.format, j.source_id, j.content_hash,"
    " j.payload, j.state, j.attempts, j.lease_generation, j.lease_owner, j.lease_deadline,"
    " j.available_at, j.failure_reason, j.stats"
)
_FROM = " FROM jobs j JOIN scopes s ON s.scope_id = j.scope_id"


async def notify(conn: Conn, fmt: str) -> None:
    """Wake pollers of ``fmt`` on every replica once the current transaction commits."""
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, fmt)


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
    hash, an active job of the same ``(source, format)`` (spec 004)."""
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


def complete_in_batch(batch: Batch, c: JobCompletion, detail_sql: str) -> None:
    """:func:`complete_tx` of a completion without children, as two parts of ``batch`` (the
    caller holds the job row's lock): ``detail_sql`` is an SQL text expression (it may use
    :data:`~telha.storage.postgres.rows.TX`)."""
    job = batch.param(c.lease.job_id, "bytea")
    at = batch.param(c.now_us, "bigint")
    batch.statement(
        "UPDATE jobs SET state = 'completed', lease_owner = NULL, lease_deadline = NULL,"
        f" stats = {batch.param(c.stats, 'bytea')}, continuation = NULL, updated_at = {at}"
        f" WHERE job_id = {job}"
    )
    batch.statement(
        f"INSERT INTO job_events (job_id, seq, at, transition, detail) VALUES ({job},"
        f" (SELECT coalesce(max(seq), 0) + 1 FROM job_events WHERE job_id = {job}), {at},"
        f" 'completed', {detail_sql})"
    )


async def _apply_failure(
    conn: Conn,
    job_id: bytes,
    fmt: str,
    kind: str,
    reason: str,
    attempts: int,
    now_us: int,
    decide: Decide,
    continuation: bytes | None,
) -> FailureDecision:
    d = decide(kind, attempts)
    await _write_failure(conn, job_id, fmt, d, reason, now_us, continuation)
    await add_event(conn, job_id, now_us, "dead" if d.state == "dead" else "retried", reason)
    return d


async def _write_failure(
    conn: Conn,
    job_id: bytes,
    fmt: str,
    d: FailureDecision,
    reason: str,
    now_us: int,
    continuation: bytes | None,
) -> None:
    await abandon_stream(conn, job_id, now_us, continuation)
    await conn.execute(
        "UPDATE jobs SET state = $1, attempts = $2, available_at = $3, failure_reason = $4,"
        " lease_owner = NULL, lease_deadline = NULL, updated_at = $5 WHERE job_id = $6",
        d.state, d.attempts, d.available_at, d.reason or reason, now_us, job_id,
    )  # fmt: skip
    if d.state == "pending":
        await notify(conn, fmt)


async def _apply_loss(
    conn: Conn,
    job: JobRecord,
    kind: str,
    reason: str,
    now_us: int,
    decide: DecideLoss,
    continuation: bytes | None,
) -> FailureDecision:
    """A job lost with its worker (``kind``: ``worker_lost`` or ``lease_expired``; the caller
    holds the row lock): its loss event, then the decision (counting its earlier losses) and a
    ``dead`` event if dead."""
    losses = await conn.fetchval(
        "SELECT count(*) FROM job_events WHERE job_id = $1 AND transition = ANY($2::text[])",
        job.job_id,
        sorted(LOSS_KINDS),
    )
    d = decide(kind, job.attempts, int(losses))
    await _write_failure(conn, job.job_id, job.format, d, reason, now_us, continuation)
    await add_event(conn, job.job_id, now_us, kind, f"{reason} (loss {int(losses) + 1})")
    if d.state == "dead":
        await add_event(conn, job.job_id, now_us, "dead", d.reason or reason)
    return d


async def _select_job(conn: Conn, job_id: bytes) -> JobRecord:
    row = await conn.fetchrow(f"SELECT {_JOB_COLS}{_FROM} WHERE j.job_id = $1", job_id)
    assert row is not None
    return _job(row)


class JobsMixin(PgBase):
    """Job operations of the PostgreSQL engine; see :class:`telha.storage.protocol.Storage`."""

    async def enqueue_job(
        self, scope: Scope, job: NewJob, *, now_us: int, dedup: bool
    ) -> EnqueueOutcome:
        """Insert a pending job, unless (with ``dedup``) the source's latest version already has
        ``job.content_hash`` or a pending/leased job covers the same ``(source, hash)``."""
        sid = await self._ensure_scope(scope)

        async def one(conn: Conn) -> EnqueueOutcome:
            return await enqueue_tx(conn, sid, job, now_us, dedup=dedup)

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
        """Lease the oldest available pending job of ``formats`` (of ``scope`` only, unless
        ``None``): state ``leased``, generation + 1, deadline ``now_us + lease_us``. The row is
        picked with ``FOR UPDATE SKIP LOCKED``: a job another transaction is leasing is passed
        over, never leased twice."""
        if not formats:
            return None
        sid = None
        if scope is not None:
            sid = await self._scope_id(scope)
            if sid is None:
                return None

        async def one(conn: Conn) -> JobRecord | None:
            # telha_lease (migration 0005): candidates in index order, SKIP LOCKED, the lease
            # and its event, in one call that is its own transaction.
            row = await conn.fetchrow(
                f"SELECT {_JOB_COLS} FROM telha_lease($1, $2, $3, $4, $5) j"
                " JOIN scopes s ON s.scope_id = j.scope_id",
                list(formats), now_us, worker_id, now_us + lease_us, sid,
            )  # fmt: skip
            return _job(row) if row is not None else None

        return await self._write("lease job", one, transaction=False)

    async def next_available_at(
        self, formats: Sequence[str], scope: Scope | None = None
    ) -> int | None:
        """Earliest ``available_at`` (µs) of a pending job of ``formats`` (in ``scope`` only,
        unless ``None``), or ``None``."""
        if not formats:
            return None
        sql = "SELECT min(available_at) FROM jobs WHERE state = 'pending' AND format = ANY($1)"
        params: list[Any] = [list(formats)]
        if scope is not None:
            sid = await self._scope_id(scope)
            if sid is None:
                return None
            sql += " AND scope_id = $2"
            params.append(sid)
        rows = await self._fetch(sql, *params)
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    async def active_job_counts(self) -> dict[tuple[str, str], int]:
        """``{(kind, state): n}`` for ``pending`` and ``leased`` jobs (each state counted
        through its partial index); absent pairs have no jobs."""
        rows = await self._fetch(
            "SELECT kind, 'pending', count(*) FROM jobs WHERE state = 'pending' GROUP BY kind"
            " UNION ALL"
            " SELECT kind, 'leased', count(*) FROM jobs WHERE state = 'leased' GROUP BY kind"
        )
        return {(str(kind), str(state)): int(n) for kind, state, n in rows}

    async def heartbeat_jobs(
        self, leases: Sequence[LeaseRef], *, now_us: int, lease_us: int
    ) -> list[bytes]:
        """Extend the leases still held under the given generations; returns their ids."""
        if not leases:
            return []

        async def tx(conn: Conn) -> list[bytes]:
            rows = await conn.fetch(
                "UPDATE jobs SET lease_deadline = $1, updated_at = $2"
                " FROM unnest($3::bytea[], $4::integer[]) AS l (job_id, gen)"
                " WHERE jobs.job_id = l.job_id AND jobs.state = 'leased'"
                " AND jobs.lease_generation = l.gen RETURNING jobs.job_id",
                now_us + lease_us,
                now_us,
                [lease.job_id for lease in leases],
                [lease.lease_generation for lease in leases],
            )
            held = {r[0] for r in rows}
            return [lease.job_id for lease in leases if lease.job_id in held]

        return await self._write("extend leases", tx)

    async def fail_job(
        self, lease: LeaseRef, kind: str, reason: str, *, now_us: int, decide: Decide
    ) -> JobRecord:
        """Record a failed attempt of a held job: back to pending (retried) or dead.

        :raises StaleLease: the caller does not hold the job.
        """

        async def tx(conn: Conn) -> JobRecord:
            attempts, fmt, cont = await check_lease(conn, lease)
            await _apply_failure(
                conn, lease.job_id, fmt, kind, reason, attempts, now_us, decide, cont
            )
            return await _select_job(conn, lease.job_id)

        return await self._write("record failure", tx)

    async def release_job(self, lease: LeaseRef, *, now_us: int, detail: str) -> bool:
        """Give a held job back (shutdown): pending at once, the attempt not counted."""

        async def tx(conn: Conn) -> bool:
            try:
                _, fmt, cont = await check_lease(conn, lease)
            except StaleLease:
                raise Rollback(False) from None
            await conn.execute(
                "UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_deadline = NULL,"
                " available_at = $1, updated_at = $1 WHERE job_id = $2",
                now_us,
                lease.job_id,
            )
            await abandon_stream(conn, lease.job_id, now_us, cont)
            await add_event(conn, lease.job_id, now_us, "released", detail)
            await notify(conn, fmt)
            return True

        return await self._write("release job", tx)

    async def reap_expired(self, *, now_us: int, decide: DecideLoss) -> list[tuple[JobRecord, str]]:
        """Expired leases back to pending (a failed attempt, ``lease_expired``) or dead. Rows
        are locked with ``SKIP LOCKED`` (one being committed, or reaped by another replica,
        is left to that transaction) and their deadline is checked on the locked row.

        :returns: ``(job as it was when reaped, new state)`` per reaped job.
        """

        async def tx(conn: Conn) -> list[tuple[JobRecord, str]]:
            rows = await conn.fetch(
                f"SELECT {_JOB_COLS}, j.continuation{_FROM}"
                " WHERE j.state = 'leased' AND j.lease_deadline < $1 ORDER BY j.job_id LIMIT 500"
                " FOR UPDATE OF j SKIP LOCKED",
                now_us,
            )
            if not rows:
                raise Rollback([])
            reaped: list[tuple[JobRecord, str]] = []
            for row in rows:
                job = _job(tuple(row)[:-1])
                reason = f"lease_expired: lease of worker {job.lease_owner} ran out"
                d = await _apply_loss(conn, job, "lease_expired", reason, now_us, decide, row[-1])
                reaped.append((job, d.state))
            return reaped

        return await self._write("reap leases", tx)

    async def lose_jobs(
        self, leases: Sequence[LeaseRef], *, now_us: int, detail: str, decide: DecideLoss
    ) -> list[tuple[JobRecord, str]]:
        """Jobs lost with their worker: ``worker_lost``, a failed attempt, pending (at once
        for a first loss, with a NOTIFY) or dead per ``decide``; each row is locked and its
        generation checked, leases no longer held are skipped."""
        if not leases:
            return []

        async def tx(conn: Conn) -> list[tuple[JobRecord, str]]:
            lost: list[tuple[JobRecord, str]] = []
            for lease in sorted(leases, key=lambda lease: lease.job_id):  # lock order
                try:
                    _, _, cont = await check_lease(conn, lease)
                except StaleLease:
                    continue
                job = await _select_job(conn, lease.job_id)
                reason = f"worker_lost: {detail}"
                d = await _apply_loss(conn, job, "worker_lost", reason, now_us, decide, cont)
                lost.append((job, d.state))
            if not lost:
                raise Rollback([])
            return lost

        return await self._write("lose jobs", tx)

    async def get_job(
        self, scope: Scope | None, job_id: bytes, *, events: bool = True
    ) -> JobRecord | None:
        """A job with its events (oldest first) unless ``events=False``; ``None`` when absent
        or in another scope."""
        rows = await self._fetch(f"SELECT {_JOB_COLS}{_FROM} WHERE j.job_id = $1", job_id)
        if not rows:
            return None
        job = _job(rows[0])
        if scope is not None and job.scope != scope:
            return None
        if not events:
            return job
        found = await self._fetch(
            "SELECT at, transition, detail FROM job_events WHERE job_id = $1 ORDER BY seq",
            job_id,
        )
        return _job(rows[0], tuple(JobEvent(*e) for e in found))
