"""The erasure blocklist check, the one place it is read inside a write (docs/operations.md,
"Erasure"): every write path — a commit, an enqueue, a streamed part, a raw store — asks it
in its own transaction, so blocklisted bytes are never written back. PostgreSQL's fast paths
(``telha_enqueue``, ``telha_commit_single`` in its ``functions.sql``) run the same statement:
:mod:`telha.storage.postgres.functions` fills it in there."""

from __future__ import annotations

from collections.abc import Iterable

from telha.domain.erasure import blockable
from telha.storage.core.tx import Tx

__all__ = ["BLOCKED", "blocked"]

#: Whether a digest is on a scope's blocklist: ``{digests}`` a condition on ``digest``, after
#: the parameter ``scope``.
BLOCKED = "SELECT 1 FROM erasure_blocklist WHERE scope_id = ? AND {digests} LIMIT 1"


async def blocked(tx: Tx, sid: int, digests: Iterable[bytes | None]) -> bool:
    """Whether one of ``digests`` (BLAKE3, 32 bytes) is on the scope's erasure blocklist;
    the empty digest never is (:func:`telha.domain.erasure.blockable`)."""
    wanted = sorted(blockable(digests))
    if not wanted:
        return False
    cond, params = tx.dialect.any("digest", wanted, "bytea")
    return await tx.fetchone(BLOCKED.format(digests=cond), sid, *params) is not None
