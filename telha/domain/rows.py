"""Pure row building for one version (its chunks, nodes, labels, edges, span rows and
ambiguities), shared by every storage engine.

Turns a :class:`~telha.domain.projection.Projection` plus its assigned transaction time into
one parameter tuple per row and table (columns in the order the engines' tables declare them);
each engine writes them with its own SQL (:mod:`telha.storage.sqlite.rows`,
:mod:`telha.storage.postgres.rows`). No I/O; runs in a worker thread or inside an engine's
transaction, so a large projection never blocks the event loop for long.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from telha.domain.errors import InvalidStream
from telha.domain.identity import edge_id, is_root
from telha.domain.ids import id_str, new_id
from telha.domain.model import BLOB_CHUNK, Changes
from telha.domain.projection import NodeOut, Projection

__all__ = ["PENDING_TX", "Existing", "Match", "VersionRows", "at_tx", "build_rows"]

_encode = msgspec.json.encode

#: Current ``(labels JSON, properties JSON, valid_from, valid_to, tx_from, source_id)`` of a
#: node id, as an engine reads it for the upsert ladder of worker-supplied ids.
Existing = dict[bytes, tuple[str, bytes, int | None, int | None, int, bytes | None]]

#: The tx to build a new version's rows at before its transaction time exists (µs; later than
#: any real time, so the upsert ladder treats every existing node as written before); the
#: rows are moved to the real time with :func:`at_tx` once it is taken.
PENDING_TX = 1 << 62


@dataclass(slots=True)
class Match:
    """What a version's nodes match in the source's previous version
    (:mod:`telha.domain.identity`): per node its match key and the previous id it takes (or
    ``None``), and each taken id's ``(labels JSON, properties JSON, valid_from, valid_to)``
    (to tell changed from unchanged)."""

    keys: list[bytes | None]
    taken: list[bytes | None]
    before: dict[bytes, tuple[str, bytes, int | None, int | None]]


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
    scope_id: int
    tx: int
    changes: Changes = field(default_factory=Changes)
    #: The first root node (:func:`telha.domain.identity.is_root`) of the projection.
    root: bytes | None = None


#: What :func:`_kind` answers.
_KINDS = ("added", "changed", "unchanged", "skip", "skip unchanged")


def _ladder(
    current: tuple[str, bytes, int | None, int | None, int, bytes | None] | None,
    content: tuple[str, bytes, int | None, int | None],
    tx: int,
    source_id: bytes,
    nid: bytes,
) -> str:
    """The upsert ladder of a worker-supplied id: ``added``, ``changed`` or ``unchanged``
    (a row is written), or ``skip`` / ``skip unchanged`` (no row)."""
    if current is None:
        return "added"
    same = current[:4] == content
    if current[4] == tx:
        if same:
            return "skip"  # an earlier part of this stream wrote it
        raise InvalidStream(
            f"node {id_str(nid)} was written by an earlier part of this stream with other content"
        )
    if current[4] > tx:
        return "skip"  # a stream pinned before a later committed write: that write stands
    if not same:
        return "changed"
    # Another source's identical version stands; this source's own is written again.
    return "unchanged" if current[5] == source_id else "skip unchanged"


def _kind(
    node: NodeOut,
    nid: bytes,
    labels_json: str,
    existing: Existing,
    before: dict[bytes, tuple[str, bytes, int | None, int | None]],
    tx: int,
    source_id: bytes,
) -> str:
    """What a node's row is to its version: ``added``, ``changed`` or ``unchanged`` (a row
    is written), or ``skip`` / ``skip unchanged`` (no row; :func:`_ladder`), for a node
    with a worker-supplied id or one whose ``nid`` is the previous version's id it took
    (any other node is ``added``: :func:`build_rows` does not call this for it)."""
    content = (labels_json, node.properties_json, node.valid_from, node.valid_to)
    if node.node_id is not None:
        return _ladder(existing.get(nid), content, tx, source_id, nid)
    return "unchanged" if before.get(nid) == content else "changed"


def _edges(
    scope_id: int, source_id: bytes, tx: int, proj: Projection, node_ids: list[bytes]
) -> tuple[list[bytes], list[tuple[Any, ...]]]:
    """The edge ids and rows of ``proj`` (ids: :func:`telha.domain.identity.edge_id`)."""
    edge_ids: list[bytes] = []
    edges: list[tuple[Any, ...]] = []
    seen: dict[tuple[str, bytes, bytes, bytes], int] = {}
    for edge in proj.edges:
        from_id = node_ids[edge.from_ref] if edge.from_ref is not None else edge.from_id
        to_id = node_ids[edge.to_ref] if edge.to_ref is not None else edge.to_id
        assert from_id is not None and to_id is not None
        same_edge = (edge.type, from_id, to_id, edge.properties_json)
        n = seen.get(same_edge, 0)
        seen[same_edge] = n + 1
        eid = edge_id(source_id, edge.type, from_id, to_id, edge.properties_json, n)
        edge_ids.append(eid)
        edges.append(
            (scope_id, eid, tx, edge.type, from_id, to_id, edge.properties_json, source_id)
        )
    return edge_ids, edges


def build_rows(
    scope_id: int,
    source_id: bytes,
    tx: int,
    blob_id: bytes,
    proj: Projection,
    existing: Existing | None = None,
    *,
    chunks: bool = True,
    match: Match | None = None,
) -> VersionRows:
    """Rows for ``proj`` written at transaction time ``tx`` (µs) under ``blob_id``.

    A node takes its worker-supplied id, else the previous version's id ``match`` gives it,
    else a fresh uuid7; it carries its match key. Every node of the version gets a row at
    ``tx`` (its provenance into this version's text) except by the upsert ladder of a
    worker-supplied id against ``existing`` (its current ``(labels JSON, properties JSON,
    valid_from, valid_to, tx_from, source_id)``): another source's identical current version
    stands (no row); a streamed part (``tx`` pinned earlier) leaves a node written after its
    pin alone, and refuses to change one an earlier part of the same stream wrote
    (:class:`InvalidStream`). Nothing is closed here: the publish closes what the new rows
    replace (:mod:`telha.storage.versions.publish`). Span rows with the same ``[start, end)`` are
    merged (first kind wins); edge ids are :func:`telha.domain.identity.edge_id`.
    """
    existing = existing or {}
    root: bytes | None = None
    text = proj.canonical
    view = memoryview(text)
    chunk_rows = [
        (scope_id, blob_id, i // BLOB_CHUNK, view[i : i + BLOB_CHUNK].tobytes())
        for i in range(0, len(text) if chunks else 0, BLOB_CHUNK)
    ]
    spans = proj.spans
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
    keys = match.keys if match is not None else [None] * len(proj.nodes)
    taken = match.taken if match is not None else [None] * len(proj.nodes)
    before = match.before if match is not None else {}
    skipped: set[int] = set()  # indices of nodes that get no new version row
    added = 0  # new nodes
    ladder = dict.fromkeys(_KINDS, 0)  # the other nodes, by _kind
    for index, (node, previous, match_key) in enumerate(zip(proj.nodes, taken, keys, strict=True)):
        nid = node.node_id or previous or new_id()
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
            # The first node with a root's label set is the first root.
            if root is None and is_root(node_labels):
                root = nid
        for i in refs:
            linked[span_keys[i]].append(nid)
        if node.node_id is None and previous is None:
            added += 1  # a new node: most of a first version's, so no call
        else:
            kind = _kind(node, nid, labels_json, existing, before, tx, source_id)
            ladder[kind] += 1
            if kind.startswith("skip"):
                skipped.add(index)
                continue
        nodes.append(
            (scope_id, nid, tx, labels_json, node.properties_json, prov, source_id,
             node.valid_from, node.valid_to, match_key)
        )  # fmt: skip
        for label in node_labels:
            labels.append((scope_id, label, nid, tx))
    edge_ids, edges = _edges(scope_id, source_id, tx, proj, node_ids)
    span_rows = [
        (scope_id, source_id, tx, start, end, kinds[(start, end)], b"".join(ids))
        for (start, end), ids in linked.items()
    ]
    ambiguities = [
        (scope_id, node_ids[a.node_ref], tx, source_id, a.kind, a.candidates_json,
         a.detector_confidence, a.applied_candidate_confidence, a.severity_hint)
        for a in proj.ambiguities
        if a.node_ref not in skipped  # an unchanged upserted node keeps its version and ambiguity
    ]  # fmt: skip
    return VersionRows(
        chunk_rows, nodes, labels, edges, span_rows, ambiguities, node_ids, edge_ids,
        scope_id, tx,
        Changes(
            added + ladder["added"],
            ladder["changed"],
            ladder["unchanged"] + ladder["skip unchanged"],  # another source's identical node
        ),
        root,
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
        rows.scope_id, tx, rows.changes, rows.root,
    )  # fmt: skip
