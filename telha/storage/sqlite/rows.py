"""Pure row building for one committed version (spec 004 apply_parts steps 3–6).

Turns a :class:`~telha.ingest.projection.Projection` plus its assigned transaction time into
the parameter tuples the SQLite engine writes with ``executemany``. No I/O; runs in a worker
thread so a large projection never blocks the event loop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any

import msgspec

from telha.errors import InvalidStream
from telha.ids import id_str, new_id
from telha.ingest.projection import Projection
from telha.model import BLOB_CHUNK

__all__ = ["VersionRows", "build_rows", "current_nodes", "insert_batched", "insert_rows"]

_encode = msgspec.json.encode


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
    existing: dict[bytes, tuple[str, bytes, int | None, int | None, int]] | None = None,
    *,
    chunks: bool = True,
) -> VersionRows:
    """Rows for ``proj`` written at transaction time ``tx`` (µs) under ``blob_id``.

    Node and edge ids are the projection's deterministic ids where given, fresh uuid7s
    otherwise. A deterministic id runs the upsert ladder of spec 004 against ``existing``
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


def current_nodes(
    conn: sqlite3.Connection, sid: int, ids: list[bytes]
) -> dict[bytes, tuple[str, bytes, int | None, int | None, int]]:
    """Current ``(labels JSON, properties JSON, valid_from, valid_to, tx_from)`` of the given
    node ids (the upsert ladder)."""
    found: dict[bytes, tuple[str, bytes, int | None, int | None, int]] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        for node_id, labels, props, vfrom, vto, tx_from in conn.execute(
            "SELECT node_id, labels, properties, valid_from, valid_to, tx_from FROM nodes"
            f" WHERE scope_id = ? AND tx_to IS NULL AND node_id IN ({','.join('?' * len(part))})",
            (sid, *part),
        ):
            found[node_id] = (labels, props, vfrom, vto, tx_from)
    return found


#: Most rows in one multi-row ``INSERT`` (a power of two; rows × columns stays under SQLite's
#: 32,766 bound parameters for up to 15 columns).
_MAX_BATCH = 2048


def insert_batched(
    conn: sqlite3.Connection, head: str, rows: Sequence[tuple[Any, ...]], tail: str = ""
) -> None:
    """``head`` (``INSERT INTO t (c1, …) VALUES``) for every row of ``rows``, as multi-row
    statements of power-of-two sizes (at most :data:`_MAX_BATCH` rows; every size's SQL is
    prepared once and cached by the driver).

    Why not ``executemany``: it releases and re-takes the GIL around every row's step, and
    each re-take waits for whichever thread holds it (up to the 5 ms switch interval). With
    a busy in-process worker thread that made a 10,000-row insert take seconds (measured:
    42 s under a spinning thread, 143 ms as multi-row statements; ~60 ms alone either way).
    """
    if not rows:
        return
    ncols = len(rows[0])
    pos, total = 0, len(rows)
    size = _MAX_BATCH
    while pos < total:
        while size > total - pos:
            size //= 2
        params = list(chain.from_iterable(rows[pos : pos + size]))
        conn.execute(_batch_sql(head, tail, ncols, size), params)
        pos += size


@lru_cache(maxsize=256)
def _batch_sql(head: str, tail: str, ncols: int, size: int) -> str:
    group = "(" + ", ".join("?" * ncols) + ")"
    return f"{head} {', '.join([group] * size)}{tail}"


def insert_rows(conn: sqlite3.Connection, rows: VersionRows) -> None:
    """Write ``rows`` inside the current transaction (span rows of the same range merge)."""
    conn.executemany(
        "INSERT OR IGNORE INTO blob_chunks (scope_id, blob_id, idx, data) VALUES (?, ?, ?, ?)",
        rows.chunks,
    )
    conn.executemany(
        "UPDATE nodes SET tx_to = ? WHERE scope_id = ? AND node_id = ? AND tx_to IS NULL",
        [(rows.tx, rows.scope_id, node_id) for node_id in rows.closes],
    )
    insert_batched(
        conn,
        "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
        " source_id, valid_from, valid_to) VALUES",
        rows.nodes,
    )
    insert_batched(
        conn, "INSERT INTO node_labels (scope_id, label, node_id, tx_from) VALUES", rows.labels
    )
    insert_batched(
        conn,
        "INSERT INTO edges (scope_id, edge_id, tx_from, type, from_id, to_id, properties) VALUES",
        rows.edges,
    )
    insert_batched(
        conn,
        'INSERT INTO span_rows (scope_id, source_id, source_version_tx, start, "end", kind,'
        " linked_nodes) VALUES",
        rows.spans,
        # || yields TEXT; the cast keeps the bytes a BLOB of 16-byte ids.
        " ON CONFLICT DO UPDATE SET"
        " linked_nodes = CAST(linked_nodes || excluded.linked_nodes AS BLOB)",
    )
    insert_batched(
        conn,
        "INSERT INTO ambiguities (scope_id, node_id, tx, source_id, kind, candidates,"
        " detector_confidence, applied_candidate_confidence, severity_hint) VALUES",
        rows.ambiguities,
    )
