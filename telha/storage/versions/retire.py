"""Retiring a source through the store (docs/rest-api.md, "Versions and diffs"): one write
transaction around :func:`telha.storage.versions.publish.retire`, written once for both
engines."""

from __future__ import annotations

from telha.domain.errors import NotFound
from telha.domain.model import Scope
from telha.storage.core.tx import Tx
from telha.storage.versions.publish import RetireOutcome, retire

__all__ = ["retire_source"]


async def retire_source(
    tx: Tx, scope: Scope, source_id: bytes, reason: str | None
) -> RetireOutcome:
    """Retire ``source_id`` of ``scope`` (see :func:`telha.storage.versions.publish.retire`).

    :raises NotFound: the scope never wrote, or the source has no published version.
    :raises Conflict: the source is being erased, or its current version was erased.
    """
    sid = await tx.known_scope_id(scope)
    if sid is None:
        raise NotFound("no such source")
    return await retire(tx, sid, source_id, reason)
