"""Pure row building for one version (its chunks, nodes, labels, edges, span rows and
ambiguities), shared by every storage engine.

Turns a :class:`~telha.domain.projection.Projection` plus its assigned transaction time into
one parameter tuple per row and table (columns in the order the engines' tables declare them);
each engine writes them with its own SQL (:mod:`telha.storage.sqlite.rows`,
:mod:`telha.storage.postgres.rows`). No I/O; runs in a worker thread or inside an engine's
transaction, so a large projection never blocks the event loop for long.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.errors import InvalidStream
from telha.domain.ids import id_str, new_id
from telha.domain.model import BLOB_CHUNK
from telha.domain.projection import Projection

__all__ = ["PENDING_TX", "Existing", "VersionRows", "at_tx", "build_rows"]

_encode = msgspec.json.encode

#: Current ``(labels JSON, properties JSON, valid_from, valid_to, tx_from)`` of a node id, as
#: an engine reads it for the upsert ladder.
Existing = dict[bytes, tuple[str, bytes, int | None, int | None, int]]

#: The tx to build a new version's rows at before its transaction time exists (µs; later than
#: any real time, so the upsert ladder treats every existing node as written before); the
#: rows are moved to the real time with :func:`at_tx` once it is taken.
PENDING_TX = 1 << 62


@dataclass(slots=True)
class VersionRows:
    """Parameter tuples for each table, and the logical ids in creation order."""

    chunks: list[tuple[Any, ...]]
    nodes: list[tuple[Any, ...]]
    labels: list[tuple[Any, ...]]
    edges: list[tuple[Any, ...]]
    spans: list[tuple[Any, ...]]
    ambiguities: list[tuple[Any, ...]]
    node_ids: list[bytes]
    edge_ids: list[bytes]
    #: Node ids whose current version this commit closes (``tx_to = tx``).
    closes: list[bytes]
    scope_id: int
    tx: int


def build_rows(
    scope_id: int,
    source_id: bytes,
    tx: int,
    blob_id: bytes,
    proj: Projection,
    existing: Existing | None = None,
    *,
    chunks: bool = True,
) -> VersionRows:
    """Rows for ``proj`` written at transaction time ``tx`` (µs) under ``blob_id``.

    Node and edge ids are the projection's deterministic ids where given, fresh uuid7s
    otherwise. A deterministic id runs the upsert ladder against ``existing``
    (its current ``(labels JSON, properties JSON, valid_from, valid_to, tx_from)``): absent →
    create; identical → no row; changed → a new version that closes the old one. A streamed
    part (``tx`` pinned earlier) leaves a node written after its pin alone, and refuses to
    change one an earlier part of the same stream wrote (:class:`InvalidStream`). Span rows
    with the same ``[start, end)`` are merged (first kind wins).
    """
    existing = existing or {}
    closes: list[bytes] = []
    text = proj.canonical
    view = memoryview(text)
    chunk_rows = [
        (scope_id, blob_id, i // BLOB_CHUNK, view[i : i + BLOB_CHUNK].tobytes())
        for i in range(0, len(text) if chunks else 0, BLOB_CHUNK)
    ]
    spans = proj.spans
    # Provenance JSON per span, built once: [[sourceId, tx, start, end], ...].
    # Provenance is [[start, end], ...]: a node version's spans are always in the version
    # that wrote it, whose source and tx the row carries (source_id, tx_from).
    span_json = [f"[{sp.start},{sp.end}]".encode() for sp in spans]
    prov_cache: dict[tuple[int, ...], bytes] = {}
    labels_cache: dict[tuple[str, ...], str] = {}
    node_ids: list[bytes] = []
    nodes: list[tuple[Any, ...]] = []
    labels: list[tuple[Any, ...]] = []
    linked: dict[tuple[int, int], list[bytes]] = {}
    kinds: dict[tuple[int, int], str] = {}
    span_keys = [(sp.start, sp.end) for sp in spans]
    for sp, key in zip(spans, span_keys, strict=True):
        if key not in kinds:
            kinds[key] = sp.kind
            linked[key] = []
    written: set[int] = set()  # indices of nodes that get a new version row
    for index, node in enumerate(proj.nodes):
        nid = node.node_id or new_id()
        node_ids.append(nid)
        refs = node.span_refs
        prov = prov_cache.get(refs)
        if prov is None:
            prov = b"[" + b",".join([span_json[i] for i in refs]) + b"]"
            prov_cache[refs] = prov
        node_labels = node.labels
        labels_json = labels_cache.get(node_labels)
        if labels_json is None:
            labels_json = labels_cache[node_labels] = _encode(list(node_labels)).decode()
        for i in refs:
            linked[span_keys[i]].append(nid)
        current = existing.get(nid) if node.node_id is not None else None
        if current is not None:
            if current[:4] == (labels_json, node.properties_json, node.valid_from, node.valid_to):
                continue  # identical: no new version
            if current[4] > tx:
                continue  # a stream pinned before a later committed write: the later one stands
            if current[4] == tx:
                raise InvalidStream(
                    f"node {id_str(nid)} was written by an earlier part of this stream with"
                    " other content"
                )
            closes.append(nid)
        written.add(index)
        nodes.append(
            (scope_id, nid, tx, labels_json, node.properties_json, prov, source_id,
             node.valid_from, node.valid_to)
        )  # fmt: skip
        for label in node_labels:
            labels.append((scope_id, label, nid, tx))
    edge_ids: list[bytes] = []
    edges: list[tuple[Any, ...]] = []
    for edge in proj.edges:
        eid = new_id()
        edge_ids.append(eid)
        from_id = node_ids[edge.from_ref] if edge.from_ref is not None else edge.from_id
        to_id = node_ids[edge.to_ref] if edge.to_ref is not None else edge.to_id
        edges.append((scope_id, eid, tx, edge.type, from_id, to_id, edge.properties_json))
    span_rows = [
        (scope_id, source_id, tx, start, end, kinds[(start, end)], b"".join(ids))
        for (start, end), ids in linked.items()
    ]
    ambiguities = [
        (scope_id, node_ids[a.node_ref], tx, source_id, a.kind, a.candidates_json,
         a.detector_confidence, a.applied_candidate_confidence, a.severity_hint)
        for a in proj.ambiguities
        if a.node_ref in written  # an unchanged upserted node keeps its version and ambiguity
    ]  # fmt: skip
    return VersionRows(
        chunk_rows, nodes, labels, edges, span_rows, ambiguities, node_ids, edge_ids, closes,
        scope_id, tx,
    )  # fmt: skip


def at_tx(rows: VersionRows, tx: int) -> VersionRows:
    """``rows`` (built at :data:`PENDING_TX`) moved to transaction time ``tx``: the tx column
    of node versions, labels, edges, span rows and ambiguities. A caller that takes ``tx``
    from a locked clock builds the rows first, so the clock is held only while they are
    written."""

    def moved(table: list[tuple[Any, ...]], col: int) -> list[tuple[Any, ...]]:
        return [(*row[:col], tx, *row[col + 1 :]) for row in table]

    return VersionRows(
        rows.chunks, moved(rows.nodes, 2), moved(rows.labels, 3), moved(rows.edges, 2),
        moved(rows.spans, 2), moved(rows.ambiguities, 2), rows.node_ids, rows.edge_ids,
        rows.closes, rows.scope_id, tx,
    )  # fmt: skip
