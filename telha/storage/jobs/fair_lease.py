"""Fair leasing across scopes, written once for both engines (docs/architecture.md, "Fair
leasing").

Each ``(scope, format)`` that has had a job has a **lease head** (table ``lease_heads``) with
the time of its last lease. A lease takes, among the heads of the poller's formats that have
an available pending job, the one leased least recently, then that scope's oldest available
job (``available_at``, then id) through the index ``jobs_fair``. So scopes take turns: a scope
with 10,000 pending jobs and another with one alternate, and the second waits at most one
lease per other busy scope. The pick reads one index entry per head (per scope and format),
never the backlog.

Heads are written by every enqueue (:func:`note_head`) and never removed, so a job that goes
back to ``pending`` (retried, released, lost) always has its head. A head without pending
work costs one index probe per lease.

PostgreSQL's fast paths (``telha_enqueue``, ``telha_lease_fair`` in its ``functions.sql``) run
the statements below: :mod:`telha.storage.postgres.functions` fills them in there.
"""

from __future__ import annotations

from collections.abc import Sequence

from telha.storage.core.tx import Tx

__all__ = [
    "CANDIDATES",
    "HEAD_ADD",
    "HEAD_FIND",
    "HEAD_TOUCH",
    "OLDEST_JOB",
    "heads_sql",
    "note_head",
    "pick",
    "touch",
]

#: Heads read per lease: on PostgreSQL a head whose jobs are all locked by other leasing
#: transactions is passed over for the next.
CANDIDATES = 8


#: Whether a head exists; parameters ``(scope, format)``.
HEAD_FIND = "SELECT 1 FROM lease_heads WHERE scope_id = ? AND format = ?"
#: A new head, never leased; parameters ``(scope, format)``.
HEAD_ADD = (
    "INSERT INTO lease_heads (scope_id, format, last_leased_at) VALUES (?, ?, 0)"
    " ON CONFLICT DO NOTHING"
)
#: A head's turn taken; parameters ``(now, scope, format)``.
HEAD_TOUCH = "UPDATE lease_heads SET last_leased_at = ? WHERE scope_id = ? AND format = ?"
#: A head's oldest available job; parameters ``(scope, format, now)``; a row lock may follow.
OLDEST_JOB = (
    "SELECT job_id FROM jobs WHERE state = 'pending' AND scope_id = ? AND format = ?"
    " AND available_at <= ? ORDER BY available_at, job_id LIMIT 1"
)


def heads_sql(formats: str, scope: str, limit: str) -> str:
    """The heads to try, least recently leased first, each with an available pending job:
    ``formats`` a condition on ``h.format``, ``scope`` empty or `` AND …`` on ``h.scope_id``,
    ``limit`` the most heads (:data:`CANDIDATES`), then a parameter ``now`` (µs) before it."""
    return (
        f"SELECT h.scope_id, h.format FROM lease_heads h WHERE {formats}{scope}"
        " AND EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'pending'"
        " AND j.scope_id = h.scope_id AND j.format = h.format AND j.available_at <= ?)"
        f" ORDER BY h.last_leased_at, h.scope_id, h.format LIMIT {limit}"
    )


async def note_head(tx: Tx, sid: int, fmt: str) -> None:
    """Make sure ``(sid, fmt)`` has a lease head (a new head counts as never leased, so a
    scope's first job goes before the busy scopes' next ones). A read when it exists, so
    enqueues never wait on a head a lease is updating; nothing when the engine already knows
    the head (:meth:`~telha.storage.core.tx.Tx.head_known`: heads are never removed, so
    SQLite's single writer remembers each one it saw committed)."""
    if tx.head_known(sid, fmt):
        return
    if await tx.fetchone(HEAD_FIND, sid, fmt) is None:
        await tx.execute(HEAD_ADD, sid, fmt)
    tx.head_noted(sid, fmt)


async def pick(
    tx: Tx, formats: Sequence[str], sid: int | None, now_us: int
) -> tuple[bytes, int, str] | None:
    """``(job_id, scope_id, format)`` of the job to lease next among ``formats`` (of scope
    ``sid`` only, unless ``None``), or ``None``: the least recently leased head with an
    available pending job (``available_at <= now_us``, µs), then its oldest such job. On
    PostgreSQL the job row is locked ``FOR UPDATE SKIP LOCKED``: a job another transaction
    is leasing is passed over."""
    cond, fparams = tx.dialect.any("h.format", formats, "text")
    scope_sql, sparams = "", tuple[int, ...]()
    if sid is not None:
        scope_sql, sparams = " AND h.scope_id = ?", (sid,)
    heads = await tx.fetchall(
        heads_sql(cond, scope_sql, str(CANDIDATES)), *fparams, *sparams, now_us
    )
    for head_sid, fmt in heads:
        row = await tx.fetchone(OLDEST_JOB + tx.skip_locked, head_sid, fmt, now_us)
        if row is not None:
            return bytes(row[0]), int(head_sid), str(fmt)
    return None


async def touch(tx: Tx, sid: int, fmt: str, now_us: int) -> None:
    """Record a lease from head ``(sid, fmt)`` at ``now_us`` (µs): the scope goes to the back
    of its format's turn."""
    await tx.execute(HEAD_TOUCH, now_us, sid, fmt)
