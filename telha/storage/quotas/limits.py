"""Per-scope limits and usage, written once for both engines (docs/operations.md, "Quotas
and rate limits").

A scope's own limits are rows of ``scope_limits`` (``telha scope set``). Its stored bytes are
counted as they are written: triggers on ``raw_chunks`` and ``blob_chunks`` (each engine's
``functions.sql``) add each chunk's length in the transaction that inserts, rewrites or
deletes it (upload, commit, stream part, erasure, retention) to ``scope_usage``, so reading
usage sums a few counter rows and never the bytes. Pending jobs are counted through the
index ``jobs_by_state``, at most up to the limit when checking one.
"""

from __future__ import annotations

from telha.domain.model import Scope
from telha.domain.quotas import pending_refusal
from telha.storage.core.tx import Tx

__all__ = [
    "ADD_USAGE",
    "PENDING_QUOTA_LOCK",
    "hold_pending",
    "pending_jobs",
    "scope_limits",
    "set_scope_limit",
    "stored_bytes",
    "total_stored_bytes",
]


#: A difference added to a scope's stored bytes, what each engine's chunk triggers run
#: (``functions.sql``); parameters ``(scope, shard, bytes)``.
ADD_USAGE = (
    "INSERT INTO scope_usage (scope_id, shard, stored_bytes) VALUES (?, ?, ?)"
    " ON CONFLICT (scope_id, shard)"
    " DO UPDATE SET stored_bytes = scope_usage.stored_bytes + excluded.stored_bytes"
)


async def scope_limits(tx: Tx, scope: Scope) -> dict[str, float]:
    """The scope's own limits, ``{key: value}`` (empty: the ``[quotas]`` defaults apply)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return {}
    rows = await tx.fetchall("SELECT key, value FROM scope_limits WHERE scope_id = ?", sid)
    return {str(k): float(v) for k, v in rows}


async def set_scope_limit(tx: Tx, scope: Scope, key: str, value: float | None) -> None:
    """Set the scope's own ``key`` to ``value`` (``0``: unlimited), or with ``None`` remove
    it (the default applies again); interns the scope if new."""
    sid = await tx.scope_id(scope)
    if value is None:
        await tx.execute("DELETE FROM scope_limits WHERE scope_id = ? AND key = ?", sid, key)
        return
    await tx.execute(
        "INSERT INTO scope_limits (scope_id, key, value) VALUES (?, ?, ?)"
        " ON CONFLICT (scope_id, key) DO UPDATE SET value = excluded.value",
        sid, key, value,
    )  # fmt: skip


async def pending_jobs(tx: Tx, scope: Scope, cap: int | None) -> int:
    """The scope's jobs in state ``pending``, counted up to ``cap`` (all when ``None``)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return 0
    limit = f" LIMIT {int(cap)}" if cap is not None else ""
    row = await tx.fetchone(
        "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE scope_id = ? AND state = 'pending'"
        f"{limit}) AS p",
        sid,
    )
    return int(row[0]) if row is not None else 0


#: The lock an enqueue held to ``max_pending_jobs`` takes before counting (the scope's source
#: lock of this name: 22 bytes, so no 16-byte source id shares it).
PENDING_QUOTA_LOCK = b"quota:max_pending_jobs"


async def hold_pending(tx: Tx, scope: Scope, sid: int, cap: int) -> None:
    """Refuse an enqueue into scope ``sid`` holding ``cap`` pending jobs already, counted
    under the scope's quota lock (a transaction-level advisory lock on PostgreSQL, so one
    such enqueue of a scope at a time on any replica; SQLite's single writer holds it
    anyway), so ingests passing the early check together cannot all be enqueued. Child
    jobs (archive members, crawled pages) and erasures are not held to it.

    :raises QuotaExceeded: ``cap`` or more jobs of the scope are pending.
    """
    await tx.lock_sources(sid, (PENDING_QUOTA_LOCK,))
    pending = await pending_jobs(tx, scope, cap)
    if pending >= cap:
        raise pending_refusal(pending, cap)


async def stored_bytes(tx: Tx, scope: Scope) -> int:
    """The scope's stored bytes: raw uploads plus canonical text chunks (the sum of its
    ``scope_usage`` counter rows)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return 0
    row = await tx.fetchone(
        "SELECT coalesce(sum(stored_bytes), 0) FROM scope_usage WHERE scope_id = ?", sid
    )
    return int(row[0]) if row is not None else 0


async def total_stored_bytes(tx: Tx) -> int:
    """Bytes stored over every scope (the ``/metrics`` gauge; no scope is named)."""
    row = await tx.fetchone("SELECT coalesce(sum(stored_bytes), 0) FROM scope_usage")
    return int(row[0]) if row is not None else 0
