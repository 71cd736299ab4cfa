"""Webhook subscriptions, signing secrets and durable deliveries, written once for both
engines (docs/operations.md).

The rule that makes deliveries lives once, in :mod:`telha.storage.webhooks.deliveries`
(:func:`job_ended`, called by every write that ends a job; re-exported here).

A deliverer claims due rows (:func:`claim`): ``next_attempt_at`` moves past the claim and
``attempts`` counts the attempt, on PostgreSQL on rows locked ``FOR UPDATE SKIP LOCKED``, so
two replicas never send the same attempt. :func:`finish` deletes a delivered or abandoned row,
schedules its next attempt, or marks it ``failed`` for good (a delivery that can never be
made, kept with its reason and never claimed again); a deliverer that died mid-send leaves
its rows to be claimed again once the claim runs out (at least once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from telha.domain.ids import new_id
from telha.domain.listings import JobFamily
from telha.domain.model import JobRecord, Scope
from telha.domain.webhooks import new_secret
from telha.storage.core.tx import Rollback, Tx
from telha.storage.jobs.reads import get_job
from telha.storage.listings.queries import family_of
from telha.storage.webhooks.deliveries import has_webhooks, job_ended, record_job_webhook

__all__ = [
    "DeliveryClaim",
    "DeliveryResult",
    "WebhookRecord",
    "claim",
    "finish",
    "has_webhooks",
    "job_ended",
    "record_job_webhook",
]


@dataclass(frozen=True, slots=True)
class WebhookRecord:
    """A scope-wide subscription: ``events`` is its bit set; ``created_at`` in µs."""

    webhook_id: bytes
    url: str
    events: int
    created_at: int


@dataclass(frozen=True, slots=True)
class DeliveryClaim:
    """A delivery claimed for one attempt: ``attempts`` counts this one; ``secret`` is the
    scope's signing secret now (``None`` if it has none); ``job`` the job with its events as
    of the claim and ``family`` its parent and children (both ``None``: it no longer
    exists); times in µs."""

    delivery_id: bytes
    scope: Scope
    job_id: bytes
    url: str
    event: str
    created_at: int
    attempts: int
    secret: str | None
    job: JobRecord | None = None
    family: JobFamily | None = None


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """The end of a claimed attempt: ``retry_at`` (µs) schedules another, ``None`` deletes
    the row (delivered, or given up); ``error`` is kept on a row left to retry. ``failed``:
    the delivery can never be made; the row is kept with state ``failed`` and ``error`` as
    its reason, never claimed again (``retry_at`` is then ignored)."""

    delivery_id: bytes
    retry_at: int | None
    error: str | None = None
    failed: bool = False


async def _secret(tx: Tx, sid: int) -> str | None:
    row = await tx.fetchone("SELECT secret FROM webhook_secrets WHERE scope_id = ?", sid)
    return str(row[0]) if row is not None else None


async def rotate_secret(tx: Tx, scope: Scope, now_us: int) -> str:
    """Make (or replace) the scope's signing secret; returns it."""
    sid = await tx.scope_id(scope)
    secret = new_secret()
    if await tx.execute(
        "UPDATE webhook_secrets SET secret = ?, created_at = ? WHERE scope_id = ?",
        secret, now_us, sid,
    ) == 0:  # fmt: skip
        await tx.execute(
            "INSERT INTO webhook_secrets (scope_id, secret, created_at) VALUES (?, ?, ?)",
            sid, secret, now_us,
        )  # fmt: skip
    return secret


async def add_webhook(
    tx: Tx, scope: Scope, url: str, events: int, now_us: int
) -> tuple[bytes, str | None]:
    """Add a scope-wide subscription; returns its id and the scope's signing secret when
    this call made it (the scope had none), else ``None``. Two concurrent first adds make
    one secret (the second's insert finds the first's row)."""
    sid = await tx.scope_id(scope)
    secret = new_secret()
    made = await tx.execute(
        "INSERT INTO webhook_secrets (scope_id, secret, created_at) VALUES (?, ?, ?)"
        " ON CONFLICT (scope_id) DO NOTHING",
        sid, secret, now_us,
    )  # fmt: skip
    webhook_id = new_id()
    await tx.execute(
        "INSERT INTO webhooks (webhook_id, scope_id, url, events, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        webhook_id, sid, url, events, now_us,
    )  # fmt: skip
    return webhook_id, secret if made else None


async def remove_webhook(tx: Tx, scope: Scope, webhook_id: bytes) -> bool:
    """Remove a scope-wide subscription (deliveries already written stay); ``False`` when the
    scope has no such subscription."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return False
    return bool(
        await tx.execute(
            "DELETE FROM webhooks WHERE scope_id = ? AND webhook_id = ?", sid, webhook_id
        )
    )


async def list_webhooks(tx: Tx, scope: Scope) -> list[WebhookRecord]:
    """The scope's subscriptions, oldest first."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    rows = await tx.fetchall(
        "SELECT webhook_id, url, events, created_at FROM webhooks WHERE scope_id = ?"
        " ORDER BY webhook_id",
        sid,
    )
    return [WebhookRecord(bytes(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]


async def has_secret(tx: Tx, scope: Scope) -> bool:
    """Whether the scope has a signing secret."""
    sid = await tx.known_scope_id(scope)
    return sid is not None and await _secret(tx, sid) is not None


async def claim(tx: Tx, now_us: int, limit: int, claim_us: int) -> list[DeliveryClaim]:
    """Claim up to ``limit`` due deliveries (oldest due first) for one attempt each: their
    next attempt moves to ``now_us + claim_us`` and their attempts count one more. Each
    comes with its job read in the same transaction (a terminal job does not change)."""
    rows = await tx.fetchall(
        "SELECT delivery_id FROM webhook_deliveries"
        " WHERE next_attempt_at <= ? AND state = 'pending'"
        f" ORDER BY next_attempt_at, delivery_id LIMIT ?{tx.skip_locked}",
        now_us, limit,
    )  # fmt: skip
    if not rows:
        raise Rollback([])
    ids = [r[0] for r in rows]
    cond, params = tx.dialect.any("delivery_id", ids, "bytea")
    await tx.execute(
        "UPDATE webhook_deliveries SET next_attempt_at = ?, attempts = attempts + 1"
        f" WHERE {cond}",
        now_us + claim_us, *params,
    )  # fmt: skip
    cond, params = tx.dialect.any("d.delivery_id", ids, "bytea")
    found = await tx.fetchall(
        "SELECT d.delivery_id, s.tenant_id, s.organization_id, d.job_id, d.url, d.event,"
        " d.created_at, d.attempts, k.secret FROM webhook_deliveries d"
        " JOIN scopes s ON s.scope_id = d.scope_id"
        f" LEFT JOIN webhook_secrets k ON k.scope_id = d.scope_id WHERE {cond}"
        " ORDER BY d.next_attempt_at, d.delivery_id",
        *params,
    )
    jobs: dict[bytes, tuple[JobRecord | None, JobFamily | None]] = {}
    for r in found:
        job_id = bytes(r[3])
        if job_id not in jobs:
            jobs[job_id] = await _job_and_family(tx, job_id)
    return [
        DeliveryClaim(
            bytes(r[0]), Scope(r[1], r[2]), bytes(r[3]), r[4], r[5], int(r[6]), int(r[7]), r[8],
            *jobs[bytes(r[3])],
        )
        for r in found
    ]  # fmt: skip


async def _job_and_family(tx: Tx, job_id: bytes) -> tuple[JobRecord | None, JobFamily | None]:
    """A delivery's job with its events, and its family (what ``GET /v1/ingest/{jobId}``
    renders), read in the claim's transaction: a terminal job does not change, and the
    deliverer then reads nothing per POST."""
    job = await get_job(tx, None, job_id, True)
    if job is None:
        return None, None
    row = await tx.fetchone("SELECT parent_job_id FROM jobs WHERE job_id = ?", job_id)
    return job, await family_of(tx, job_id, row[0] if row is not None else None)


async def finish(tx: Tx, results: Sequence[DeliveryResult]) -> None:
    """Record claimed attempts' ends: delete the finished rows, mark the failed ones,
    reschedule the others."""
    failed = [(r.error or "failed", r.delivery_id) for r in results if r.failed]
    done = [(r.delivery_id,) for r in results if r.retry_at is None and not r.failed]
    again = [
        (r.retry_at, r.error, r.delivery_id)
        for r in results
        if r.retry_at is not None and not r.failed
    ]
    if failed:
        await tx.executemany(
            "UPDATE webhook_deliveries SET state = 'failed', last_error = ? WHERE delivery_id = ?",
            failed,
        )
    if done:
        await tx.executemany("DELETE FROM webhook_deliveries WHERE delivery_id = ?", done)
    if again:
        await tx.executemany(
            "UPDATE webhook_deliveries SET next_attempt_at = ?, last_error = ?"
            " WHERE delivery_id = ?",
            again,
        )


async def delivery_times(tx: Tx) -> tuple[int | None, int | None]:
    """``(next due, oldest written)`` (µs) over the deliveries not yet made (``failed`` ones
    are not): the earliest ``next_attempt_at`` and ``created_at`` (each read from its
    index), ``None`` when there are none."""
    row = await tx.fetchone(
        "SELECT (SELECT min(next_attempt_at) FROM webhook_deliveries WHERE state = 'pending'),"
        " (SELECT min(created_at) FROM webhook_deliveries WHERE state = 'pending')"
    )
    assert row is not None
    return (
        int(row[0]) if row[0] is not None else None,
        int(row[1]) if row[1] is not None else None,
    )


async def pending_for_jobs(tx: Tx, job_ids: Sequence[bytes]) -> int:
    """Deliveries not yet made of jobs ``job_ids``, ``failed`` ones not counted (tests and
    the crash tier)."""
    cond, params = tx.dialect.any("job_id", job_ids, "bytea")
    row = await tx.fetchone(
        f"SELECT count(*) FROM webhook_deliveries WHERE {cond} AND state = 'pending'", *params
    )
    return int(row[0]) if row is not None else 0
