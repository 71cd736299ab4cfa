"""Connectors and the items they created, written once for both engines
(docs/connectors.md; the tables: docs/architecture.md, "Connectors").

A connector's facts live in ``connectors`` and ``connector_items``, keyed (scope, connector,
external id) → source id, never in ``source_versions``: a version written for a connector
item is an ordinary version of the source the item's id names.
"""

from __future__ import annotations

import json

from telha.domain.connectors import ConnectorItem, ConnectorRecord, settings_json
from telha.domain.model import Scope
from telha.storage.core.tx import Tx

__all__ = [
    "CONNECTOR_COLS",
    "add_connector",
    "connector_items",
    "connector_row",
    "find_item",
    "get_connector",
    "list_connectors",
    "record_item",
    "remove_connector",
]

#: The columns :func:`connector_row` reads, in order.
CONNECTOR_COLS = "connector_id, kind, settings, every_s, prune_max_fraction, created_at, removed_at"
_ITEM_COLS = (
    "connector_id, external_id, source_id, name, marker, modified_us, size, acl, updated_at,"
    " retired_at"
)


def connector_row(r: tuple[object, ...]) -> ConnectorRecord:
    """A ``connectors`` row (:data:`CONNECTOR_COLS`) as a record."""
    return ConnectorRecord(
        bytes(r[0]),  # type: ignore[call-overload]
        str(r[1]),
        json.loads(str(r[2])),
        int(r[3]) if r[3] is not None else None,  # type: ignore[call-overload]
        float(r[4]),  # type: ignore[arg-type]
        int(r[5]),  # type: ignore[call-overload]
        int(r[6]) if r[6] is not None else None,  # type: ignore[call-overload]
    )


def _item(r: tuple[object, ...]) -> ConnectorItem:
    return ConnectorItem(
        bytes(r[0]),  # type: ignore[call-overload]
        str(r[1]),
        bytes(r[2]),  # type: ignore[call-overload]
        str(r[3]),
        str(r[4]) if r[4] is not None else None,
        int(r[5]) if r[5] is not None else None,  # type: ignore[call-overload]
        int(r[6]) if r[6] is not None else None,  # type: ignore[call-overload]
        json.loads(str(r[7])) if r[7] is not None else None,
        int(r[8]),  # type: ignore[call-overload]
        int(r[9]) if r[9] is not None else None,  # type: ignore[call-overload]
    )


async def add_connector(tx: Tx, scope: Scope, c: ConnectorRecord) -> None:
    """Register ``c`` in ``scope``."""
    sid = await tx.scope_id(scope)
    await tx.execute(
        "INSERT INTO connectors (connector_id, scope_id, kind, settings, every_s,"
        " prune_max_fraction, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        c.connector_id, sid, c.kind, settings_json(c.settings), c.every_s,
        c.prune_max_fraction, c.created_at,
    )  # fmt: skip


async def list_connectors(tx: Tx, scope: Scope) -> list[ConnectorRecord]:
    """The scope's connectors not removed, oldest first."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    rows = await tx.fetchall(
        f"SELECT {CONNECTOR_COLS} FROM connectors WHERE scope_id = ? AND removed_at IS NULL"
        " ORDER BY connector_id",
        sid,
    )
    return [connector_row(r) for r in rows]


async def get_connector(tx: Tx, scope: Scope, connector_id: bytes) -> ConnectorRecord | None:
    """``connector_id`` of ``scope`` unless removed, else ``None`` (another scope's too)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return None
    row = await tx.fetchone(
        f"SELECT {CONNECTOR_COLS} FROM connectors WHERE scope_id = ? AND connector_id = ?"
        " AND removed_at IS NULL",
        sid, connector_id,
    )  # fmt: skip
    return connector_row(row) if row is not None else None


async def remove_connector(tx: Tx, scope: Scope, connector_id: bytes, now_us: int) -> bool:
    """Mark a connector removed: it runs no more and its tokens are refused; the sources it
    created stay, with their items (a removed connector's id is never reused). ``False``:
    no such connector in ``scope``."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return False
    changed = await tx.execute(
        "UPDATE connectors SET removed_at = ? WHERE scope_id = ? AND connector_id = ?"
        " AND removed_at IS NULL",
        now_us, sid, connector_id,
    )  # fmt: skip
    return bool(changed)


async def record_item(tx: Tx, scope: Scope, item: ConnectorItem) -> None:
    """Write (or replace) the item row of ``item``'s (connector, external id); a retired
    item recorded again is live again (``retired_at`` as ``item`` says)."""
    sid = await tx.scope_id(scope)
    acl = json.dumps(item.acl) if item.acl is not None else None
    await tx.execute(
        f"INSERT INTO connector_items (scope_id, {_ITEM_COLS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (scope_id, connector_id, external_id) DO UPDATE SET"
        " name = excluded.name, marker = excluded.marker, modified_us = excluded.modified_us,"
        " size = excluded.size, acl = excluded.acl, updated_at = excluded.updated_at,"
        " retired_at = excluded.retired_at",
        sid, item.connector_id, item.external_id, item.source_id, item.name, item.marker,
        item.modified_us, item.size, acl, item.updated_at, item.retired_at,
    )  # fmt: skip


async def find_item(
    tx: Tx, scope: Scope, connector_id: bytes, external_id: str
) -> ConnectorItem | None:
    """The item row of (``connector_id``, ``external_id``) in ``scope``, or ``None``."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return None
    row = await tx.fetchone(
        f"SELECT {_ITEM_COLS} FROM connector_items"
        " WHERE scope_id = ? AND connector_id = ? AND external_id = ?",
        sid, connector_id, external_id,
    )  # fmt: skip
    return _item(row) if row is not None else None


async def connector_items(tx: Tx, scope: Scope, connector_id: bytes) -> list[ConnectorItem]:
    """Every item row of ``connector_id`` in ``scope`` (retired ones too), by external id."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    rows = await tx.fetchall(
        f"SELECT {_ITEM_COLS} FROM connector_items WHERE scope_id = ? AND connector_id = ?"
        " ORDER BY external_id",
        sid, connector_id,
    )  # fmt: skip
    return [_item(r) for r in rows]
