"""Stable node identity across the versions of one source (docs/architecture.md, "Versions
and node identity"). Pure; no I/O.

A node without a worker-supplied id gets a **match key**: BLAKE3 (16 bytes) of its labels
and its content —

- a root node (a label in :data:`ROOT_LABELS`): its labels alone, so a version's root keeps
  its id however the document changed;
- a node with spans: the bytes of its span texts, in its span order;
- a node without spans: its properties JSON.

A new version's node takes the id of a node of the source's previous version with the same
key: the n-th node of a key (in submission order) takes the n-th unclaimed id of that key (in
id order). The key never includes the node's position or its parent's content, so an
unchanged paragraph keeps its id though text before it moved, a moved paragraph keeps its id,
and an edited paragraph gets a new id (the old one is closed). A worker-supplied id is its own
identity and has no key.

Edges get deterministic ids (:func:`edge_id`) from their source, type, endpoints, properties
and occurrence, so an edge between matched nodes keeps its id too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import blake3

from telha.domain.projection import NodeOut, Projection

__all__ = [
    "DEFERRED",
    "INHERITED",
    "ROOT_LABELS",
    "Candidates",
    "assign",
    "deferred_keys",
    "edge_id",
    "is_root",
    "labels_part",
    "match_keys",
    "stored_key",
]

#: Labels of a version's root node (spec 004's ``root_node_id``).
ROOT_LABELS = frozenset({"DOCUMENT", "TABLE", "WORKBOOK", "MESSAGE", "FILE"})

#: The previous version's unclaimed node ids per match key, each in id order.
Candidates = dict[bytes, deque[bytes]]


def is_root(labels: Iterable[str]) -> bool:
    """Whether a node with ``labels`` is a version root (:data:`ROOT_LABELS`)."""
    return not ROOT_LABELS.isdisjoint(labels)


def _digest(labels: bytes, root: bool, props: bytes, texts: list[bytes] | None) -> bytes:
    """The key: BLAKE3 (16 bytes) of ``labels`` (each followed by NUL) and a root tag, or
    the properties JSON (a node without spans), or the span texts (``texts``: each
    length-prefixed, or a tagged marker). Distinct inputs hash distinct bytes."""
    if root:
        return blake3.blake3(labels + b"\x01root").digest(16)
    if texts is None:
        return blake3.blake3(labels + b"\x04" + props).digest(16)
    return blake3.blake3(labels + b"".join(texts)).digest(16)


def _encode_labels(labels: Iterable[str]) -> bytes:
    return b"".join(x.encode() + b"\x00" for x in labels)


def _texts(node: NodeOut, proj: Projection) -> list[bytes] | None:
    """``node``'s span texts in its span order, each length-prefixed (``None``: no spans)."""
    if not node.span_refs:
        return None
    text, base, spans = proj.canonical, proj.base, proj.spans
    parts = []
    for i in node.span_refs:
        start, end, _ = spans[i]
        if start < base:
            # A streamed part's span reaching into text an earlier part stored: that part
            # is known by its length only.
            parts.append(b"\x02earlier %d" % (base - start))
            start = base
        piece = text[start - base : end - base]
        parts.append(b"\x03%d:" % len(piece))
        parts.append(piece)
    return parts


def match_keys(proj: Projection) -> list[bytes | None]:
    """Per node of ``proj``, its match key (16 bytes), or ``None`` for a worker-supplied id.
    Computed once per projection (kept in ``proj.match_keys``): the store computes them off
    the event loop before its transaction, and the match and a fast path reuse them."""
    if proj.match_keys is not None:
        return proj.match_keys
    encoded: dict[tuple[str, ...], tuple[bytes, bool]] = {}
    out: list[bytes | None] = []
    for node in proj.nodes:
        if node.node_id is not None:
            out.append(None)
            continue
        labels = encoded.get(node.labels)
        if labels is None:
            labels = encoded[node.labels] = labels_part(node.labels)
        joined, root = labels
        texts = None if root else _texts(node, proj)
        out.append(_digest(joined, root, node.properties_json, texts))
    proj.match_keys = out
    return out


#: The match key a source's first whole version stores: its keys are deferred until a second
#: version needs them (:func:`stored_key`). Empty, so a version's rows enter the key index in
#: id order rather than at random places.
DEFERRED = b""


#: The match key a streamed part stores in the row of a node it matched: the node's key is
#: the one its earlier rows hold (a node keeps its key across versions: it was matched by
#: it), found through the key index from those rows. One byte: neither a key (16 bytes) nor
#: :data:`DEFERRED`. The key index leaves it out, so a re-ingest's matched rows add no entry.
INHERITED = b"\x00"


def deferred_keys(proj: Projection) -> list[bytes | None]:
    """Per node of ``proj``, :data:`DEFERRED`, or ``None`` for a worker-supplied id."""
    return [None if node.node_id is not None else DEFERRED for node in proj.nodes]


def stored_key(
    labels: tuple[bytes, bool], properties: bytes, provenance: Sequence[Sequence[int]], text: bytes
) -> bytes | None:
    """The match key of a stored node version whose key was not written (a source's first
    version defers its keys until a second version needs them): the key :func:`match_keys`
    gave the node. ``labels``: :func:`labels_part` of its labels; ``properties``: its
    properties JSON; ``provenance``: ``[[start, end], ...]``, bytes into ``text``, the
    canonical text of the version that wrote it. ``None`` when the provenance is not the
    version's own (a trimmed node's ``[start, end, tx]``)."""
    joined, root = labels
    texts = None
    if not root and provenance:
        texts = []
        for span in provenance:
            if len(span) != 2:
                return None
            start, end = span
            texts.append(b"\x03%d:" % (end - start))
            texts.append(text[start:end])
    return _digest(joined, root, properties, texts)


def labels_part(labels: Sequence[str]) -> tuple[bytes, bool]:
    """What a node's labels add to its match key: the labels encoded, and whether one is a
    root label (:func:`stored_key`)."""
    return _encode_labels(labels), is_root(labels)


def assign(keys: Sequence[bytes | None], candidates: Candidates) -> list[bytes | None]:
    """Per node, the previous version's id it takes (consumed from ``candidates`` in order),
    or ``None`` (a new node, or a worker-supplied id)."""
    out: list[bytes | None] = []
    for key in keys:
        ids = candidates.get(key) if key is not None else None
        out.append(ids.popleft() if ids else None)
    return out


def edge_id(
    source_id: bytes, type_: str, from_id: bytes, to_id: bytes, props: bytes, n: int
) -> bytes:
    """The id (16 bytes) of the ``n``-th edge (0-based, in submission order) of one version
    of ``source_id`` with this type, endpoints and properties JSON: the first 8 bytes of
    ``to_id``, then 8 bytes of BLAKE3 of all of it. The prefix keeps a version's edges in the
    order of their targets (uuid7 ids are time-ordered), so they are appended to the edge
    index rather than scattered over it, and listed in the order their targets were made."""
    h = blake3.blake3(b"edge\x00")
    h.update(source_id)
    h.update(type_.encode())
    h.update(b"\x00")
    h.update(from_id)
    h.update(to_id)
    h.update(props)
    h.update(b"\x00%d" % n)
    raw = bytearray(to_id[:8] + h.digest(8))
    raw[6] = (raw[6] & 0x0F) | 0x80  # UUID version 8 (custom), RFC 9562 variant
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)
