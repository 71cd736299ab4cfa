"""The read API, written once for both engines (docs/rest-api.md): API keys,
source versions, canonical text slices, span rows, nodes as of a transaction time, node
listings and edges with live endpoints.

Each operation is one :meth:`~telha.storage.core.engine.EngineOps.read`: on SQLite one
hand-off to a pooled reader, which runs it whole in one read transaction; on PostgreSQL one
pooled connection, one round trip per statement. Records are built by
:mod:`telha.domain.records`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec

from telha.domain.erasure import ERASE_KIND
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
from telha.domain.records import node_record, slice_chunks, slice_text, version_record
from telha.storage.core.tx import Tx
from telha.storage.core.visible import visible
from telha.storage.reads.acl import admitted
from telha.storage.versions.commit import IDENTITY_COLS, VERSION_COLS

__all__ = [
    "NODE_COLS",
    "blob_range",
    "get_node",
    "has_source",
    "list_nodes",
    "node_edges",
    "read_text",
    "source_versions",
    "span_rows",
    "version_at",
]

#: :class:`~telha.domain.model.SourceVersion` columns as reads select them (with the erasure,
#: the publish and the retire).
_READ_COLS = VERSION_COLS + ", erased_at, erasure_id, erase_reason, published_tx, root_node_id,"
_READ_COLS += f" changes, retired_tx, retire_reason, {IDENTITY_COLS}"
#: Node row ``n``'s columns in the order :func:`~telha.domain.records.node_record` unpacks.
NODE_COLS = "n.node_id, n.labels, n.properties, n.tx_from, n.tx_to, n.valid_from, n.valid_to,"
NODE_COLS += " n.provenance, n.source_id"
_decode = msgspec.json.decode


async def has_source(tx: Tx, scope: Scope, source_id: bytes) -> bool:
    """Whether ``scope`` knows the source: a version row (finalized or a stream's pinned
    one) or a job of it other than an erasure."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return False
    row = await tx.fetchone(
        "SELECT EXISTS (SELECT 1 FROM source_versions WHERE scope_id = ? AND source_id = ?)"
        " OR EXISTS (SELECT 1 FROM jobs WHERE scope_id = ? AND source_id = ? AND kind <> ?)",
        sid, source_id, sid, source_id, ERASE_KIND,
    )  # fmt: skip
    return row is not None and bool(row[0])


async def source_versions(
    tx: Tx, scope: Scope, source_id: bytes, latest: bool
) -> list[SourceVersion]:
    """A source's finalized versions, newest first (only the newest when ``latest``). A
    streamed version still open, or abandoned, has no canonical hash and is not listed."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    rows = await tx.fetchall(
        f"SELECT {_READ_COLS} FROM source_versions WHERE scope_id = ? AND source_id = ?"
        " AND published_tx IS NOT NULL ORDER BY tx DESC" + (" LIMIT 1" if latest else ""),
        sid,
        source_id,
    )
    return [version_record(r) for r in rows]


async def version_at(tx: Tx, scope: Scope, source_id: bytes, at: int) -> tuple[int, SourceVersion]:
    """``(scope id, version)`` of the finalized version written at ``at``.

    :raises NotFound: no such version in ``scope``.
    :raises ContentErased: the version was erased.
    """
    sid = await tx.known_scope_id(scope)
    if sid is not None:
        row = await tx.fetchone(
            f"SELECT {_READ_COLS} FROM source_versions"
            " WHERE scope_id = ? AND source_id = ? AND tx = ? AND published_tx IS NOT NULL",
            sid,
            source_id,
            at,
        )
        if row is not None:
            version = version_record(row)
            if version.erased_at is not None:
                raise ContentErased(f"source version {at} was erased: {version.erase_reason}")
            return sid, version
    raise NotFound("no such source version")


async def read_text(
    tx: Tx, scope: Scope, source_id: bytes, at: int, start: int | None, end: int | None
) -> bytes:
    """Bytes ``[start, end)`` of a version's canonical text: only the chunks that hold them
    are read (:func:`telha.domain.records.slice_chunks`)."""
    sid, version = await version_at(tx, scope, source_id, at)
    length = version.text_len or 0
    lo, hi, first, last = slice_chunks(length, start, end)
    if version.blob_id is None or length == 0:
        return b""
    chunks = await blob_range(tx, sid, version.blob_id, first, last)
    return slice_text(chunks, first, lo, hi)


async def blob_range(tx: Tx, sid: int, blob_id: bytes, first: int, last: int) -> list[bytes]:
    """Chunks ``first``…``last`` (inclusive, 1 MiB each but the last) of a version's text."""
    rows = await tx.fetchall(
        "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ?"
        " AND idx BETWEEN ? AND ? ORDER BY idx",
        sid, blob_id, first, last,
    )  # fmt: skip
    return [bytes(r[0]) for r in rows]


async def span_rows(tx: Tx, scope: Scope, source_id: bytes, at: int) -> list[SpanRecord]:
    """A version's span rows in document order."""
    sid, _ = await version_at(tx, scope, source_id, at)
    rows = await tx.fetchall(
        'SELECT start, "end", kind, linked_nodes FROM span_rows WHERE scope_id = ?'
        ' AND source_id = ? AND source_version_tx = ? ORDER BY start, "end"',
        sid,
        source_id,
        at,
    )
    return [
        SpanRecord(s, e, k, [ids[i : i + 16] for i in range(0, len(ids), 16)])
        for s, e, k, ids in rows
    ]


async def get_node(
    tx: Tx,
    scope: Scope,
    node_id: bytes,
    as_of: int | None,
    principals: tuple[str, ...] | None = None,
) -> NodeVersion | None:
    """The current version of a node (``as_of``: the version live at that transaction time),
    with the ambiguities detected when it was written; ``None`` when absent or erased, or
    with ``principals`` when its source's ACL admits none of them."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return None
    where, params = visible("n", as_of)
    if principals is not None:
        seen_acl, acl_params = admitted("n", principals, tx.dialect)
        where, params = f"{where} AND {seen_acl}", (*params, *acl_params)
    row = await tx.fetchone(
        f"SELECT {NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.node_id = ? AND {where}"
        " ORDER BY n.tx_from DESC LIMIT 1",
        sid,
        node_id,
        *params,
    )
    if row is None:
        return None
    node = node_record(row)
    found = await tx.fetchall(
        "SELECT kind, candidates, detector_confidence, applied_candidate_confidence,"
        " severity_hint FROM ambiguities WHERE scope_id = ? AND node_id = ? AND tx = ?",
        sid,
        node_id,
        node.tx_from,
    )
    if found:
        node = replace(
            node, ambiguities=[Ambiguity(k, _decode(c), dc, ac, sh) for k, c, dc, ac, sh in found]
        )
    return node


async def list_nodes(
    tx: Tx,
    scope: Scope,
    label: str | None,
    source_id: bytes | None,
    limit: int,
    after: bytes | None,
    as_of: int | None = None,
    principals: tuple[str, ...] | None = None,
) -> list[NodeVersion]:
    """Nodes (current, or as of transaction time ``as_of``) ordered by id, strictly after
    ``after``, at most ``limit``; with ``label`` through the label index, with ``source_id``
    of that source only; with ``principals``, of the sources whose ACL admits one of them
    only (:func:`~telha.storage.reads.acl.admitted`)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    seen, seen_params = visible("n", as_of)
    if label is not None:
        sql = (
            f"SELECT {NODE_COLS} FROM node_labels l JOIN nodes n ON n.scope_id = l.scope_id"
            " AND n.node_id = l.node_id AND n.tx_from = l.tx_from"
            f" WHERE l.scope_id = ? AND l.label = ? AND l.node_id > ? AND {seen}"
        )
        params: list[Any] = [sid, label, after or b"", *seen_params]
        key = "l.node_id"
    else:
        sql = f"SELECT {NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.node_id > ?"
        sql += f" AND {seen}"
        params = [sid, after or b"", *seen_params]
        key = "n.node_id"
    if source_id is not None:
        sql += " AND n.source_id = ?"
        params.append(source_id)
    if principals is not None:
        seen_acl, acl_params = admitted("n", principals, tx.dialect)
        sql += f" AND {seen_acl}"
        params += acl_params
    rows = await tx.fetchall(f"{sql} ORDER BY {key} LIMIT ?", *params, limit)
    return [node_record(r) for r in rows]


async def node_edges(
    tx: Tx,
    scope: Scope,
    node_id: bytes,
    direction: Direction,
    as_of: int | None = None,
    principals: tuple[str, ...] | None = None,
) -> list[EdgeRecord]:
    """A node's edges in ``direction`` (current, or as of transaction time ``as_of``), by
    edge id; an edge whose far endpoint is not in the graph then (a dangling edge), or with
    ``principals`` is of a source whose ACL admits none of them, is left out."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    edge_seen, edge_params = visible("e", as_of, node=False)
    far_seen, far_params = visible("x", as_of)
    if principals is not None:
        far_acl, acl_params = admitted("x", principals, tx.dialect)
        far_seen, far_params = f"{far_seen} AND {far_acl}", (*far_params, *acl_params)
    parts: list[str] = []
    params: list[Any] = []
    for side, near, far in (
        (Direction.OUT, "from_id", "to_id"),
        (Direction.IN, "to_id", "from_id"),
    ):
        if direction in (side, Direction.BOTH):
            parts.append(
                "SELECT e.edge_id, e.type, e.from_id, e.to_id, e.properties FROM edges e"
                f" WHERE e.scope_id = ? AND e.{near} = ? AND {edge_seen} AND EXISTS"
                f" (SELECT 1 FROM nodes x WHERE x.scope_id = e.scope_id AND x.node_id = e.{far}"
                f" AND {far_seen})"
            )
            params += [sid, node_id, *edge_params, *far_params]
    rows = await tx.fetchall(" UNION ".join(parts) + " ORDER BY 1", *params)
    return [EdgeRecord(eid, t, f, to, _decode(p)) for eid, t, f, to, p in rows]
