"""Reads of the SQLite engine (DESIGN.md §5): versions, canonical text slices, span rows,
nodes as of a transaction time, listings, edges with live endpoints. All on the reader pool.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec

from telha.domain.errors import ContentErased, NotFound
from telha.domain.model import (
    Ambiguity,
    Direction,
    EdgeRecord,
    NodeVersion,
    Scope,
    SourceVersion,
    SpanRecord,
)
from telha.domain.records import node_record as _node
from telha.domain.records import slice_chunks, slice_text
from telha.domain.records import version_record as _version
from telha.storage.sqlite.base import SqliteBase

__all__ = ["ReadsMixin"]

VERSION_COLS = (
    "source_id, tx, name, format, content_hash, canonical_text_hash, size, worker, job_id,"
    " blob_id, text_len"
)
#: :class:`~telha.domain.model.SourceVersion` columns as reads select them (with the erasure).
_READ_COLS = VERSION_COLS + ", erased_at, erasure_id, erase_reason"
_NODE_COLS = "n.node_id, n.labels, n.properties, n.tx_from, n.tx_to, n.valid_from, n.valid_to,"
_NODE_COLS += " n.provenance, n.source_id"
_decode = msgspec.json.decode


class ReadsMixin(SqliteBase):
    """Read operations; see :class:`telha.storage.protocol.Storage`."""

    async def scope_for_key(self, key_hash: bytes) -> Scope | None:
        """See :meth:`telha.storage.protocol.Storage.scope_for_key`."""
        rows = await self._fetchall(
            "SELECT s.tenant_id, s.organization_id FROM api_keys k"
            " JOIN scopes s ON s.scope_id = k.scope_id"
            " WHERE k.key_hash = ? AND k.revoked_at IS NULL",
            (key_hash,),
        )
        return Scope(rows[0][0], rows[0][1]) if rows else None

    async def latest_version(self, scope: Scope, source_id: bytes) -> SourceVersion | None:
        """See :meth:`telha.storage.protocol.Storage.latest_version`."""
        versions = await self._versions(scope, source_id, limit=1)
        return versions[0] if versions else None

    async def source_versions(self, scope: Scope, source_id: bytes) -> list[SourceVersion]:
        """See :meth:`telha.storage.protocol.Storage.source_versions`."""
        return await self._versions(scope, source_id, limit=-1)

    async def _versions(self, scope: Scope, source_id: bytes, *, limit: int) -> list[SourceVersion]:
        sid = await self._scope_id(scope)
        if sid is None:
            return []
        rows = await self._fetchall(
            f"SELECT {_READ_COLS} FROM source_versions WHERE scope_id = ? AND source_id = ?"
            " AND canonical_text_hash IS NOT NULL ORDER BY tx DESC LIMIT ?",
            (sid, source_id, limit),
        )
        return [_version(r) for r in rows]

    async def _version_at(
        self, scope: Scope, source_id: bytes, tx: int
    ) -> tuple[int, SourceVersion]:
        sid = await self._scope_id(scope)
        if sid is not None:
            rows = await self._fetchall(
                f"SELECT {_READ_COLS} FROM source_versions"
                " WHERE scope_id = ? AND source_id = ? AND tx = ?"
                " AND canonical_text_hash IS NOT NULL",
                (sid, source_id, tx),
            )
            if rows:
                version = _version(rows[0])
                if version.erased_at is not None:
                    raise ContentErased(f"source version {tx} was erased: {version.erase_reason}")
                return sid, version
        raise NotFound("no such source version")

    async def read_text(
        self, scope: Scope, source_id: bytes, tx: int, start: int | None, end: int | None
    ) -> bytes:
        """See :meth:`telha.storage.protocol.Storage.read_text`."""
        sid, version = await self._version_at(scope, source_id, tx)
        length = version.text_len or 0
        lo, hi, first, last = slice_chunks(length, start, end)
        if version.blob_id is None or length == 0:
            return b""
        rows = await self._fetchall(
            "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ?"
            " AND idx BETWEEN ? AND ? ORDER BY idx",
            (sid, version.blob_id, first, last),
        )
        return slice_text([r[0] for r in rows], first, lo, hi)

    async def span_rows(self, scope: Scope, source_id: bytes, tx: int) -> list[SpanRecord]:
        """See :meth:`telha.storage.protocol.Storage.span_rows`."""
        sid, _ = await self._version_at(scope, source_id, tx)
        rows = await self._fetchall(
            'SELECT start, "end", kind, linked_nodes FROM span_rows WHERE scope_id = ?'
            ' AND source_id = ? AND source_version_tx = ? ORDER BY start, "end"',
            (sid, source_id, tx),
        )
        return [
            SpanRecord(s, e, k, [ids[i : i + 16] for i in range(0, len(ids), 16)])
            for s, e, k, ids in rows
        ]

    async def get_node(self, scope: Scope, node_id: bytes, as_of: int | None) -> NodeVersion | None:
        """See :meth:`telha.storage.protocol.Storage.get_node`."""
        sid = await self._scope_id(scope)
        if sid is None:
            return None
        params: tuple[Any, ...]
        if as_of is None:
            where, params = "n.tx_to IS NULL AND NOT n.erased", (sid, node_id)
        else:
            where = "n.tx_from <= ? AND (n.tx_to IS NULL OR n.tx_to > ?) AND NOT n.erased"
            params = (sid, node_id, as_of, as_of)
        rows = await self._fetchall(
            f"SELECT {_NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.node_id = ? AND {where}"
            " ORDER BY n.tx_from DESC LIMIT 1",
            params,
        )
        if not rows:
            return None
        node = _node(rows[0])
        found = await self._fetchall(
            "SELECT kind, candidates, detector_confidence, applied_candidate_confidence,"
            " severity_hint FROM ambiguities WHERE scope_id = ? AND node_id = ? AND tx = ?",
            (sid, node_id, node.tx_from),
        )
        if found:
            node = replace(
                node,
                ambiguities=[Ambiguity(k, _decode(c), dc, ac, sh) for k, c, dc, ac, sh in found],
            )
        return node

    async def list_nodes(
        self,
        scope: Scope,
        *,
        label: str | None,
        source_id: bytes | None,
        limit: int,
        after: bytes | None,
    ) -> list[NodeVersion]:
        """See :meth:`telha.storage.protocol.Storage.list_nodes`."""
        sid = await self._scope_id(scope)
        if sid is None:
            return []
        after = after or b""
        if label is not None:
            sql = (
                f"SELECT {_NODE_COLS} FROM node_labels l JOIN nodes n ON n.scope_id = l.scope_id"
                " AND n.node_id = l.node_id AND n.tx_from = l.tx_from"
                " WHERE l.scope_id = ? AND l.label = ? AND l.node_id > ? AND n.tx_to IS NULL"
                " AND NOT n.erased"
            )
            params: tuple[Any, ...] = (sid, label, after)
            if source_id is not None:
                sql += " AND n.source_id = ?"
                params += (source_id,)
            sql += " ORDER BY l.node_id LIMIT ?"
        elif source_id is not None:
            sql = (
                f"SELECT {_NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.source_id = ?"
                " AND n.node_id > ? AND n.tx_to IS NULL AND NOT n.erased ORDER BY n.node_id LIMIT ?"
            )
            params = (sid, source_id, after)
        else:
            sql = (
                f"SELECT {_NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.node_id > ?"
                " AND n.tx_to IS NULL AND NOT n.erased ORDER BY n.node_id LIMIT ?"
            )
            params = (sid, after)
        return [_node(r) for r in await self._fetchall(sql, (*params, limit))]

    async def node_edges(
        self, scope: Scope, node_id: bytes, direction: Direction
    ) -> list[EdgeRecord]:
        """See :meth:`telha.storage.protocol.Storage.node_edges`."""
        sid = await self._scope_id(scope)
        if sid is None:
            return []
        live = (
            "EXISTS (SELECT 1 FROM nodes x WHERE x.scope_id = e.scope_id AND x.node_id = {col}"
            " AND x.tx_to IS NULL AND NOT x.erased)"
        )
        parts = []
        params: list[Any] = []
        for side, near, far in (
            (Direction.OUT, "from_id", "to_id"),
            (Direction.IN, "to_id", "from_id"),
        ):
            if direction in (side, Direction.BOTH):
                parts.append(
                    "SELECT e.edge_id, e.type, e.from_id, e.to_id, e.properties FROM edges e"
                    f" WHERE e.scope_id = ? AND e.{near} = ? AND e.tx_to IS NULL AND "
                    + live.format(col=f"e.{far}")
                )
                params += [sid, node_id]
        rows = await self._fetchall(" UNION ".join(parts) + " ORDER BY 1", tuple(params))
        return [EdgeRecord(eid, t, f, to, _decode(p)) for eid, t, f, to, p in rows]
