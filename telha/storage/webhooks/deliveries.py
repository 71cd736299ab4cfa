"""The one rule that makes webhook deliveries (docs/operations.md, "Webhooks"), written once
for both engines: :func:`job_ended`, called by every write that moves a job into a terminal
state (:data:`~telha.domain.model.TERMINAL_JOB_STATES`: completion, a failure or loss that
dead-letters, the reaper, erasure), inserts one ``webhook_deliveries`` row per subscription
of the job (its ``options.webhook``) and of its scope (``telha webhook add``) that asked for
that state — in the same transaction, so a committed terminal state always has its
deliveries. PostgreSQL's single-statement commit (``telha_commit_single``) writes none, so a
job :func:`has_webhooks` says is subscribed takes the general path instead.

Claims, outcomes and subscriptions are in :mod:`telha.storage.webhooks.subscriptions`.
"""

from __future__ import annotations

from telha.domain.ids import new_id
from telha.domain.model import WebhookTarget
from telha.domain.webhooks import event_bit
from telha.storage.core.tx import Tx

__all__ = ["has_webhooks", "job_ended", "record_job_webhook"]


async def record_job_webhook(tx: Tx, job_id: bytes, target: WebhookTarget) -> None:
    """Store a new job's own subscription (its ``options.webhook``)."""
    await tx.execute(
        "INSERT INTO job_webhooks (job_id, url, events) VALUES (?, ?, ?)",
        job_id, target.url, target.events,
    )  # fmt: skip


async def job_ended(tx: Tx, job_id: bytes, state: str, now_us: int) -> int:
    """Write the deliveries of a job that has just reached terminal ``state`` (the caller
    holds its row, in the transaction that writes the state); returns how many. Due at
    once."""
    bit = event_bit(state)
    if not bit:
        return 0
    rows = await tx.fetchall(
        "SELECT j.scope_id, w.url FROM jobs j JOIN job_webhooks w ON w.job_id = j.job_id"
        " WHERE j.job_id = ? AND (w.events & ?) <> 0"
        " UNION ALL"
        " SELECT j.scope_id, w.url FROM jobs j JOIN webhooks w ON w.scope_id = j.scope_id"
        " WHERE j.job_id = ? AND (w.events & ?) <> 0",
        job_id, bit, job_id, bit,
    )  # fmt: skip
    if rows:
        await tx.executemany(
            "INSERT INTO webhook_deliveries (delivery_id, scope_id, job_id, url, event,"
            " created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(new_id(), sid, job_id, url, state, now_us, now_us) for sid, url in rows],
        )
    return len(rows)


async def has_webhooks(tx: Tx, sid: int, job_id: bytes) -> bool:
    """Whether a job of scope ``sid`` would get a delivery on some terminal state (its own
    subscription, or any of its scope's)."""
    row = await tx.fetchone(
        "SELECT 1 FROM job_webhooks WHERE job_id = ?"
        " UNION ALL SELECT 1 FROM webhooks WHERE scope_id = ? LIMIT 1",
        job_id, sid,
    )  # fmt: skip
    return row is not None
