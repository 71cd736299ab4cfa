"""The validated projection every ingest path hands to storage.

A :class:`Projection` is what a submission becomes once it has passed validation: canonical
text as UTF-8 bytes, spans as byte ranges into it, nodes and edges referring to spans and to each
other by index. The JSON bypass builds one directly; worker submissions are converted to one.
Pure data, no I/O. The per-item records are named tuples: cheap to build by the ten thousand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["AmbiguityOut", "EdgeOut", "NodeOut", "Projection", "SpanOut"]


class SpanOut(NamedTuple):
    """A span: ``[start, end)`` UTF-8 byte offsets into the canonical text, and its ``kind``."""

    start: int
    end: int
    kind: str


class NodeOut(NamedTuple):
    """A node to create: labels, properties (compact JSON object bytes), span indices.

    ``node_id`` is a worker-supplied deterministic id (16 bytes) or ``None`` for a fresh uuid7.
    """

    labels: tuple[str, ...]
    properties_json: bytes
    span_refs: tuple[int, ...]
    node_id: bytes | None = None
    #: Valid time in µs; ``None`` is unbounded.
    valid_from: int | None = None
    valid_to: int | None = None


class EdgeOut(NamedTuple):
    """An edge: each endpoint is a node index in this projection (``*_ref``) or an id (``*_id``)."""

    type: str
    from_ref: int | None
    to_ref: int | None
    properties_json: bytes = b"{}"
    from_id: bytes | None = None
    to_id: bytes | None = None


class AmbiguityOut(NamedTuple):
    """A temporal ambiguity of node ``node_ref``: ``candidates_json`` is a JSON array, best
    first, of ``{label, validFrom, validTo, span: [start, end] | null}`` (µs, byte offsets);
    the node's valid time is already the first candidate's interval."""

    node_ref: int
    kind: str
    candidates_json: bytes
    detector_confidence: float | None
    applied_candidate_confidence: float | None
    severity_hint: str | None


@dataclass(slots=True)
class Projection:
    """Canonical text (UTF-8, NFC, LF), spans, nodes and edges of one source version — or,
    for a streamed partial, the text it appends at byte ``base`` and its spans in global
    offsets. ``earlier_offsets`` are span offsets that fall inside text earlier partials
    stored: storage checks they sit on UTF-8 boundaries."""

    canonical: bytes
    spans: list[SpanOut] = field(default_factory=list)
    nodes: list[NodeOut] = field(default_factory=list)
    edges: list[EdgeOut] = field(default_factory=list)
    base: int = 0
    earlier_offsets: list[int] = field(default_factory=list)
    ambiguities: list[AmbiguityOut] = field(default_factory=list)
    #: Per node, its match key (:func:`telha.domain.identity.match_keys` fills it once).
    match_keys: list[bytes | None] | None = None
