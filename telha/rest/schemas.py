"""Response bodies of the REST front (DESIGN.md §5, issue "Core service" §6), as msgspec
Structs: camelCase on the wire, ids as UUID strings, hashes as hex, times as µs integers.
The OpenAPI document is generated from these."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "Deduplicated",
    "EdgeList",
    "EdgeOut",
    "ErrorBody",
    "ErrorDetail",
    "IngestApplied",
    "IngestEnqueued",
    "Interval",
    "JobEventOut",
    "JobStatus",
    "NodeList",
    "NodeOut",
    "Provenance",
    "ProvenanceSpanOut",
    "SourceOut",
    "SpanList",
    "SpanOut",
    "VersionOut",
]


class _Out(msgspec.Struct, rename="camel", kw_only=True):
    pass


class ErrorDetail(_Out):
    code: str
    message: str


class ErrorBody(_Out):
    error: ErrorDetail


class IngestApplied(_Out):
    """201: a ``format=json`` request applied synchronously."""

    deduplicated: bool
    source_id: str
    source_version_tx: int
    node_ids: list[str]
    edge_ids: list[str]


class Deduplicated(_Out, omit_defaults=True):
    """200: identical bytes to the source's latest version (nothing written), or to a job
    still pending/leased (``jobId`` names it)."""

    deduplicated: bool
    source_id: str
    job_id: str | None = None


class IngestEnqueued(_Out):
    """202: a job was enqueued for a format worker; poll ``statusUrl``."""

    deduplicated: bool
    job_id: str
    source_id: str
    status_url: str


class JobEventOut(_Out):
    at: int
    transition: str
    detail: str | None


class JobStatus(_Out):
    """``GET /v1/ingest/{jobId}``: state is pending, leased, completed or dead."""

    job_id: str
    kind: str
    state: str
    attempts: int
    source_id: str
    events: list[JobEventOut]
    failure_reason: str | None
    stats: dict[str, Any] | None


class VersionOut(_Out):
    source_version_tx: int
    content_hash: str
    canonical_text_hash: str | None
    size: int
    worker: str | None
    job_id: str | None


class SourceOut(_Out):
    source_id: str
    name: str
    format: str
    versions: list[VersionOut]


class SpanOut(_Out):
    start: int
    end: int
    kind: str
    linked_nodes: list[str]


class SpanList(_Out):
    spans: list[SpanOut]


class Interval(_Out):
    """A time interval in µs; ``None`` is unbounded."""

    from_: int | None = msgspec.field(name="from")
    to: int | None


class ProvenanceSpanOut(_Out):
    source_id: str
    source_version_tx: int
    start: int
    end: int
    text: str


class Provenance(_Out):
    spans: list[ProvenanceSpanOut]


class CandidateOut(_Out):
    """One reading: its label, the valid time it implies (µs), the evidence span (bytes)."""

    label: str
    valid_from: int | None
    valid_to: int | None
    span: list[int] | None


class AmbiguityOut(_Out):
    """A temporal ambiguity of this node version (spec 000); candidates best first, the first
    one applied to ``validTime``."""

    kind: str
    candidates: list[CandidateOut]
    detector_confidence: float | None
    applied_candidate_confidence: float | None
    severity_hint: str | None


class NodeOut(_Out):
    node_id: str
    labels: list[str]
    properties: dict[str, Any]
    valid_time: Interval
    tx_time: Interval
    provenance: Provenance
    #: Only on ``GET /v1/nodes/{nodeId}`` (not in listings): the version's ambiguities.
    ambiguities: list[AmbiguityOut] | msgspec.UnsetType = msgspec.UNSET


class NodeList(_Out):
    nodes: list[NodeOut]
    next_cursor: str | None


class EdgeOut(_Out):
    edge_id: str
    type: str
    from_: str = msgspec.field(name="from")
    to: str
    properties: dict[str, Any]


class EdgeList(_Out):
    edges: list[EdgeOut]
