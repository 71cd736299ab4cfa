"""Which sources a request acting for principals sees (docs/rest-api.md, "Principals"): the
SQL form of :func:`telha.domain.acl.admits`, the one condition every listing, search and
graph read adds when a request names principals, on both engines.

A source's ACL is its connector item's (``connector_items.acl``, a JSON array of principal
strings; one item per source): the current ACL governs every version of the source, reads
as of an earlier time included, so a principal the remote no longer lists loses the history
too. A source no connector created has no ACL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from telha.domain.model import Scope
from telha.storage.core.dialect import Dialect
from telha.storage.core.tx import Tx

__all__ = ["admitted", "source_acl"]


def admitted(
    alias: str, principals: Sequence[str], dialect: Dialect
) -> tuple[str, tuple[Any, ...]]:
    """``(condition, params)``: the source of row ``alias`` (its ``scope_id`` and
    ``source_id`` columns) is seen by a request acting for ``principals`` (not empty): it
    has no ACL, or its ACL names one of them. A row without a source (``source_id`` NULL)
    is seen. The probe is one lookup of ``connector_items_by_source``, and an ACL's array
    is read only for a source that has one."""
    elements = dialect.json_text_elements("ci.acl", "j")
    member, params = dialect.any("j.value", principals, "text")
    return (
        f"NOT EXISTS (SELECT 1 FROM connector_items ci WHERE ci.scope_id = {alias}.scope_id"
        f" AND ci.source_id = {alias}.source_id AND ci.acl IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM {elements} WHERE {member}))",
        params,
    )


async def source_acl(tx: Tx, scope: Scope, source_id: bytes) -> list[str] | None:
    """The ACL of a source of ``scope`` (its connector item's principals), ``None`` when it
    has none (no connector created it, or its item carries no ACL)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return None
    row = await tx.fetchone(
        "SELECT acl FROM connector_items WHERE scope_id = ? AND source_id = ?", sid, source_id
    )
    if row is None or row[0] is None:
        return None
    acl = json.loads(row[0])
    return [str(p) for p in acl] if isinstance(acl, list) else []
