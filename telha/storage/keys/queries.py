"""REST API keys (``telha api-key create``/``list``/``revoke``, docs/cli-and-client.md),
written once for both engines: a new key, the keys of the store or of one scope, a revoke,
and when a key was last used.

A revoke takes effect on the next lookup of the key; the REST front remembers a looked-up
key for at most 10 s (``telha.rest.state.KeyCache``), so a revoked key is refused within 10 s
everywhere. ``last_used_at`` is written by that lookup, at most once a minute per key and
process (:data:`LAST_USED_EVERY_US`): it is "last used" to the minute, never a write per
request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from telha.domain.model import Scope
from telha.storage.core.tx import Tx

__all__ = [
    "LAST_USED_EVERY_US",
    "KeyAccess",
    "KeyRecord",
    "insert_api_key",
    "key_access",
    "key_used",
    "list_keys",
    "revoke_key",
    "scope_for_key",
]

#: How stale a key's ``last_used_at`` may get before a lookup writes it again, µs.
LAST_USED_EVERY_US = 60_000_000


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One API key as listed (never the key, nor its hash): times in µs since the Unix
    epoch; ``last_used_at`` ``None`` when no request has used it yet, ``revoked_at``
    ``None`` while it is live; ``principals`` the ones it acts for (``None``: none, the
    whole scope; docs/rest-api.md, "Principals")."""

    key_id: str
    scope: Scope
    created_at: int
    last_used_at: int | None
    revoked_at: int | None
    principals: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class KeyAccess:
    """What a live API key grants: its scope, and the principals it acts for (``None``:
    none, the whole scope)."""

    scope: Scope
    principals: tuple[str, ...] | None


def _principals(stored: str | None) -> tuple[str, ...] | None:
    return tuple(json.loads(stored)) if stored is not None else None


async def key_access(tx: Tx, key_hash: bytes) -> KeyAccess | None:
    """The scope and principals of an unrevoked API key, by the hash of the key; ``None``
    for an unknown or revoked key."""
    row = await tx.fetchone(
        "SELECT s.tenant_id, s.organization_id, k.principals FROM api_keys k"
        " JOIN scopes s ON s.scope_id = k.scope_id"
        " WHERE k.key_hash = ? AND k.revoked_at IS NULL",
        key_hash,
    )
    return KeyAccess(Scope(row[0], row[1]), _principals(row[2])) if row is not None else None


async def list_keys(tx: Tx, scope: Scope | None, revoked: bool) -> list[KeyRecord]:
    """The store's keys (``scope``: that scope's only), oldest first; revoked ones only
    when ``revoked``."""
    sql = (
        "SELECT k.key_id, s.tenant_id, s.organization_id, k.created_at, k.last_used_at,"
        " k.revoked_at, k.principals"
        " FROM api_keys k JOIN scopes s ON s.scope_id = k.scope_id WHERE "
    )
    params: list[object] = []
    sql += "1 = 1" if revoked else "k.revoked_at IS NULL"
    if scope is not None:
        sql += " AND s.tenant_id = ? AND s.organization_id = ?"
        params += [scope.tenant_id, scope.organization_id]
    rows = await tx.fetchall(sql + " ORDER BY k.created_at, k.key_id", *params)
    return [KeyRecord(r[0], Scope(r[1], r[2]), r[3], r[4], r[5], _principals(r[6])) for r in rows]


async def revoke_key(tx: Tx, key_id: str, at: int) -> int | None:
    """Revoke the key ``key_id`` at ``at`` (µs); its revoke time (the first one, when it
    was revoked already), or ``None`` for an unknown id."""
    await tx.execute(
        "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", at, key_id
    )
    row = await tx.fetchone("SELECT revoked_at FROM api_keys WHERE key_id = ?", key_id)
    return None if row is None else int(row[0])


async def key_used(tx: Tx, key_hash: bytes, at: int) -> None:
    """Note that the key hashing to ``key_hash`` was used at ``at`` (µs); a later time
    already noted is kept."""
    await tx.execute(
        "UPDATE api_keys SET last_used_at = ? WHERE key_hash = ?"
        " AND (last_used_at IS NULL OR last_used_at < ?)",
        at, key_hash, at,
    )  # fmt: skip


async def insert_api_key(
    tx: Tx,
    scope: Scope,
    key_id: str,
    key_hash: bytes,
    at: int,
    principals: tuple[str, ...] | None = None,
) -> None:
    """Store an API key (its hash) for ``scope``, interning the scope if new, with the
    principals it acts for (``None``: none; docs/rest-api.md, "Principals")."""
    acts_for = json.dumps(list(principals)) if principals is not None else None
    await tx.execute(
        "INSERT INTO api_keys (key_hash, key_id, scope_id, created_at, principals)"
        " VALUES (?, ?, ?, ?, ?)",
        key_hash, key_id, await tx.scope_id(scope), at, acts_for,
    )  # fmt: skip


async def scope_for_key(tx: Tx, key_hash: bytes) -> Scope | None:
    """The scope of an unrevoked API key, by the hash of the key."""
    row = await tx.fetchone(
        "SELECT s.tenant_id, s.organization_id FROM api_keys k"
        " JOIN scopes s ON s.scope_id = k.scope_id"
        " WHERE k.key_hash = ? AND k.revoked_at IS NULL",
        key_hash,
    )
    return Scope(row[0], row[1]) if row is not None else None
