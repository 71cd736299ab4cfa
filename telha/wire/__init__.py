"""The REST API's wire schemas (docs/rest-api.md), shared by the server (:mod:`telha.rest`)
and the client (:mod:`telha.client`): msgspec Structs, camelCase on the wire, ids as UUID
strings, hashes as hex, times as µs integers. The OpenAPI document is generated from these.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from telha.wire.identity import OutdatedOut, ProjectionOut, ReprojectOut
from telha.wire.usage import LimitsOut, UsageOut

__all__ = [
    "ByteRange",
    "ChangesOut",
    "ChunkList",
    "ChunkOut",
    "Deduplicated",
    "DiffOut",
    "EdgeList",
    "EdgeOut",
    "ErasedSourceOut",
    "ErasedVersionOut",
    "ErasureOut",
    "ErasurePreviewOut",
    "ErrorBody",
    "ErrorDetail",
    "IngestApplied",
    "IngestEnqueued",
    "Interval",
    "JobEventOut",
    "JobList",
    "JobStatus",
    "JobSummaryOut",
    "LimitsOut",
    "LocatedOut",
    "NodeChangeOut",
    "NodeList",
    "NodeOut",
    "OutdatedOut",
    "PreviewSourceOut",
    "PreviewVersionOut",
    "ProjectionOut",
    "Provenance",
    "ProvenanceSpanOut",
    "ReadyOut",
    "ReprojectOut",
    "RetireOut",
    "RetiredOut",
    "SearchHitOut",
    "SearchResult",
    "SourceList",
    "SourceOut",
    "SourceState",
    "SourceSummaryOut",
    "SpanList",
    "SpanOut",
    "UsageOut",
    "VersionOut",
    "VersionState",
]

#: How a listed version stands (docs/rest-api.md, "Versions and diffs"): ``current`` (its
#: source's current graph), ``superseded`` (a later version replaced it), ``retired`` (the
#: source was retired while it was current), ``erased`` (GDPR erasure).
VersionState = Literal["current", "superseded", "retired", "erased"]
#: How a listed source stands (docs/rest-api.md, "Listings"): ``pending`` (only jobs, dead
#: ones included: no version was ever written), else its latest version's state.
SourceState = Literal["pending", "current", "retired", "erased"]


class _Out(msgspec.Struct, rename="camel", kw_only=True):
    pass


class ErrorDetail(_Out):
    """``{code, message}``: ``code`` one of the REST error codes (docs/rest-api.md)."""

    code: str
    message: str


class ErrorBody(_Out):
    """Every error response: ``{"error": {"code", "message"}}`` (docs/rest-api.md)."""

    error: ErrorDetail


class IngestApplied(_Out, omit_defaults=True):
    """201: a ``format=json`` request applied synchronously; ``stats`` only when there are
    any (``{"empty": true}``: an empty input, docs/formats.md "Empty input")."""

    deduplicated: bool
    source_id: str
    source_version_tx: int
    node_ids: list[str]
    edge_ids: list[str]
    stats: dict[str, Any] | None = None


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
    """One job event: ``at`` µs since the Unix epoch, ``transition``, ``detail``."""

    at: int
    transition: str
    detail: str | None


class JobStatus(_Out):
    """``GET /v1/ingest/{jobId}`` (and ``POST /v1/ingest/{jobId}/cancel``): state is pending,
    leased, completed, dead or cancelled. ``parentJobId``: the job whose completion enqueued
    this one (an e-mail's attachment, an archive's file, a crawled page), else ``null``;
    ``children``: this job's child jobs counted by state (``{state: count}``; list them with
    ``GET /v1/ingest?parent=``)."""

    job_id: str
    kind: str
    state: str
    attempts: int
    source_id: str
    events: list[JobEventOut]
    failure_reason: str | None
    stats: dict[str, Any] | None
    parent_job_id: str | None = None
    children: dict[str, int] = msgspec.field(default_factory=dict)
    #: Why a ``pending`` job may wait for ever, e.g. ``"no worker polls format tsv"``
    #: (docs/operations.md, "Readiness"); ``null`` otherwise.
    hint: str | None = None


class JobSummaryOut(_Out):
    """One job of ``GET /v1/ingest``: ``name`` its source's name, ``attempts`` as on
    ``GET /v1/ingest/{jobId}``, ``createdAt``/``updatedAt`` µs since the Unix epoch,
    ``parentJobId`` the job that enqueued it (``null`` for a client's)."""

    job_id: str
    kind: str
    state: str
    source_id: str
    name: str | None
    attempts: int
    created_at: int
    updated_at: int
    failure_reason: str | None
    parent_job_id: str | None


class JobList(_Out):
    """A page of jobs, newest first; ``nextCursor`` is opaque, ``null`` on the last page."""

    jobs: list[JobSummaryOut]
    next_cursor: str | None


class ChangesOut(_Out):
    """What a version's publish did to its source's nodes (docs/architecture.md, "Versions
    and node identity"): new ids, closed ids, matched with other labels or properties,
    matched and equal."""

    nodes_added: int
    nodes_removed: int
    nodes_changed: int
    nodes_unchanged: int


class RetiredOut(_Out):
    """A retire: its transaction time (µs) and the reason given, if any."""

    tx: int
    reason: str | None


class VersionParentOut(_Out):
    """The parent of a child source's version (an e-mail's attachment, an archive's
    member): ``jobId`` the job whose completion enqueued the job that wrote this version,
    ``sourceId`` and ``name`` that job's source (``null`` once retention removed a parent
    job that wrote no version), ``sourceVersionTx`` the version it wrote (``null`` when it
    wrote none)."""

    job_id: str
    source_id: str | None
    name: str | None
    source_version_tx: int | None


class VersionOut(_Out):
    """A published source version: its ``state``, when it was published (µs), its root node
    (the DOCUMENT, TABLE, WORKBOOK, MESSAGE or FILE node; ``null`` if it has none) and what
    its publish changed (``null`` for versions written before this was recorded). An erased
    one (docs/operations.md, "Erasure") says when (µs), why and by which erasure, and its
    text and spans answer 410 CONTENT_ERASED."""

    source_version_tx: int
    state: VersionState
    published_tx: int
    root_node_id: str | None
    changes: ChangesOut | None
    content_hash: str
    canonical_text_hash: str | None
    size: int
    worker: str | None
    job_id: str | None
    erased: bool = False
    erased_at: int | None = None
    erasure_reason: str | None = None
    erasure_id: str | None = None
    #: Set on a version a child job wrote (:class:`VersionParentOut`), else ``null``.
    parent: VersionParentOut | None = None
    #: How the bytes were read (docs/architecture.md, "Dedup, identity and versions"): the
    #: projection fingerprint (hex), its identity (``worker``, ``projection``, ``parsers``,
    #: ``format``, ``options``), and why this version superseded the one before it
    #: (``content``, ``options``, ``projection``, ``restored``; ``null``: a first version).
    fingerprint: str | None = None
    projection: ProjectionOut | None = None
    reason: str | None = None


class ErasedVersionOut(_Out):
    """One version an erasure erased: ``sourceId`` (UUID) and ``sourceVersionTx`` (its
    transaction time, µs)."""

    source_id: str
    source_version_tx: int


class ErasedSourceOut(_Out):
    """One source an erasure erased versions of: ``sourceId`` and its ``name``."""

    source_id: str
    name: str


class ErasureOut(_Out):
    """200 of ``POST /v1/sources/{sourceId}/erase``: what one erasure erased. ``versions``
    includes other sources' versions that shared the erased bytes or canonical text;
    ``nodes`` were hidden (provenance only in erased versions), ``nodesTrimmed`` kept other
    provenance and lost only the erased spans; ``edges`` written by erased versions were
    scrubbed; ``jobs`` pending or leased ended ``dead`` (``erased``); ``bytes`` = canonical
    text redacted + raw uploads deleted + inline job content deleted. ``erasureId`` is the
    erase job (``GET /v1/ingest/{erasureId}``); ``versionTx`` null = every version."""

    erasure_id: str
    source_id: str
    version_tx: int | None
    reason: str
    erased_at: int
    versions: list[ErasedVersionOut]
    nodes: int
    nodes_trimmed: int
    span_rows: int
    edges: int
    jobs: int
    bytes: int
    #: The sources of ``versions`` with their names, by source id (absent from erasures
    #: recorded before it was added).
    sources: list[ErasedSourceOut] = msgspec.field(default_factory=list)


class ReadyOut(_Out):
    """200 of ``GET /readyz``: ``status`` is ``"ready"``; ``formats`` the worker formats a
    worker polls through this process (in-process or remote over gRPC), sorted."""

    status: str
    formats: list[str]


class PreviewVersionOut(_Out):
    """A version a dry run would erase: its tx (µs) and the node versions it wrote."""

    source_version_tx: int
    nodes: int


class PreviewSourceOut(_Out):
    """A source a dry run would erase versions of: ``name``, those ``versions`` (oldest
    first) and their ``nodes`` summed."""

    source_id: str
    name: str
    versions: list[PreviewVersionOut]
    nodes: int


class ErasurePreviewOut(_Out):
    """200 of ``POST /v1/sources/{sourceId}/erase?dryRun=true``: what the erasure would
    erase now, nothing erased. ``sources`` includes other sources sharing the bytes or
    canonical text (each with its name); ``versions`` lists the versions as the real
    answer would; ``nodes`` sums the node versions they wrote. ``dryRun`` is always true."""

    dry_run: bool
    source_id: str
    version_tx: int | None
    sources: list[PreviewSourceOut]
    versions: list[ErasedVersionOut]
    nodes: int


class SourceOut(_Out):
    """``GET /v1/sources/{sourceId}``: the source and its published versions, newest first;
    ``retired`` when the source is retired (its latest version was current at the retire),
    else ``null``. The fields of :class:`SourceSummaryOut` too: a source whose jobs wrote no
    version yet (pending, or dead) has ``state`` ``pending``, no versions and its last job."""

    source_id: str
    name: str
    format: str
    retired: RetiredOut | None
    versions: list[VersionOut]
    state: SourceState = "current"
    latest_version_tx: int | None = None
    version_count: int = 0
    last_job_id: str | None = None
    last_job_state: str | None = None
    changed_at: int = 0


class SourceSummaryOut(_Out):
    """One source of ``GET /v1/sources``: ``state`` ``pending`` (only jobs, dead ones
    included), ``current``, ``retired`` or ``erased``; ``latestVersionTx`` its latest
    published version (µs, ``null`` when none was ever written) and ``versionCount`` how
    many; its last job and that job's state now; ``changedAt`` (µs) when it last changed (a
    job enqueued, a version published, retired or erased), the listing's order."""

    source_id: str
    name: str
    format: str
    latest_version_tx: int | None
    version_count: int
    state: SourceState
    last_job_id: str | None
    last_job_state: str | None
    changed_at: int


class SourceList(_Out):
    """A page of sources, newest change first; ``nextCursor`` is opaque, ``null`` on the
    last page."""

    sources: list[SourceSummaryOut]
    next_cursor: str | None


class RetireOut(_Out):
    """200 of ``DELETE /v1/sources/{sourceId}``: the retire (the first one's, when retired
    again), the version that was current then (``versionTx``, µs) and how many of the
    source's node versions it closed (``nodesClosed``; a node another source still supports
    is among them, and keeps a version of its own with that source's spans)."""

    source_id: str
    retired: RetiredOut
    version_tx: int
    nodes_closed: int


class SpanOut(_Out):
    """One span row: ``[start, end)`` offsets into canonical text (UTF-8 bytes, or the
    ``units`` asked for), its ``kind``."""

    start: int
    end: int
    kind: str
    linked_nodes: list[str]


class SpanList(_Out):
    """A version's span rows in document order."""

    spans: list[SpanOut]


class ChunkOut(_Out):
    """One retrieval chunk (docs/rest-api.md, "Chunks"): ``index`` (0-based, reading order);
    ``start``/``end``, its own range of the canonical text (in the ``units`` asked for);
    ``ranges``: ``[[start, end]]``, or ``[[start, end], [headerStart, headerEnd]]`` when a
    table's header is repeated at its top; ``text``: the header's text (when repeated) then
    the text of ``[start, end)``, exactly; ``headingPath``: the SECTION titles above its
    first byte, outermost first; ``pages``: ``[first, last]`` (1-based) or ``null``;
    ``nodeIds``: the nodes of the spans it overlaps, in reading order."""

    index: int
    start: int
    end: int
    ranges: list[list[int]]
    text: str
    heading_path: list[str]
    pages: list[int] | None
    node_ids: list[str]


class ChunkList(_Out):
    """A page of a version's chunks, with the parameters they were cut with; pass
    ``nextCursor`` (``null`` on the last page) as ``cursor`` with the same parameters."""

    source_id: str
    source_version_tx: int
    max_bytes: int
    overlap: int
    within: Literal["section", "document"]
    units: Literal["byte", "codepoint", "utf16"]
    chunks: list[ChunkOut]
    next_cursor: str | None


class Interval(_Out):
    """A time interval in µs; ``None`` is unbounded."""

    from_: int | None = msgspec.field(name="from")
    to: int | None


class ProvenanceSpanOut(_Out):
    """One provenance span of a node: the version it points into, byte offsets and text."""

    source_id: str
    source_version_tx: int
    start: int
    end: int
    text: str


class Provenance(_Out):
    """A node's provenance: the spans of canonical text it came from."""

    spans: list[ProvenanceSpanOut]


class CandidateOut(_Out):
    """One reading: its label, the valid time it implies (µs), the evidence span (bytes)."""

    label: str
    valid_from: int | None
    valid_to: int | None
    span: list[int] | None


class AmbiguityOut(_Out):
    """A temporal ambiguity of this node version (docs/formats.md); candidates best first,
    the first one applied to ``validTime``."""

    kind: str
    candidates: list[CandidateOut]
    detector_confidence: float | None
    applied_candidate_confidence: float | None
    severity_hint: str | None


class NodeOut(_Out):
    """``GET /v1/nodes/{nodeId}``: labels, properties, valid and transaction time (µs)."""

    node_id: str
    labels: list[str]
    properties: dict[str, Any]
    valid_time: Interval
    tx_time: Interval
    provenance: Provenance
    #: Only on ``GET /v1/nodes/{nodeId}`` (not in listings): the version's ambiguities.
    ambiguities: list[AmbiguityOut] | msgspec.UnsetType = msgspec.UNSET


class NodeList(_Out):
    """A page of nodes; ``nextCursor`` is opaque, ``null`` on the last page."""

    nodes: list[NodeOut]
    next_cursor: str | None


class EdgeOut(_Out):
    """One edge (``from``/``to`` node ids), current at the read."""

    edge_id: str
    type: str
    from_: str = msgspec.field(name="from")
    to: str
    properties: dict[str, Any]


class EdgeList(_Out):
    """A node's edges whose far endpoint exists."""

    edges: list[EdgeOut]


class NodeChangeOut(_Out):
    """A node in both versions of a diff with other labels or properties: its row in
    ``from`` (``before``) and in ``to`` (``after``)."""

    before: NodeOut
    after: NodeOut


class DiffOut(_Out):
    """``GET /v1/sources/{sourceId}/diff``: one page of what changed from version ``from``
    to version ``to`` (transaction times, µs; ``from`` is ``null`` when ``to`` is the first
    version: every node is added). Nodes are in id order across the three lists;
    ``unchanged`` counts the whole diff (the same on every page); ``nextCursor`` is opaque,
    ``null`` on the last page."""

    from_: int | None = msgspec.field(name="from")
    to: int
    added: list[NodeOut]
    removed: list[NodeOut]
    changed: list[NodeChangeOut]
    unchanged: int
    next_cursor: str | None


class ByteRange(_Out):
    """``[start, end)``: UTF-8 byte offsets into a version's canonical text."""

    start: int
    end: int


class SearchHitOut(_Out):
    """One hit of ``GET /v1/search``: a span row of a current version (``[start, end)``
    bytes of ``sourceVersionTx``'s text, its ``kind``, the nodes it links and their labels),
    a ``snippet`` of its text (``…`` where cut), ``matches`` (the matched words' byte ranges
    in the same text, sorted: slice the text there to highlight), and ``page`` (1-based) and
    ``bbox`` (top-left origin) of the first linked node that has them."""

    node_ids: list[str]
    labels: list[str]
    source_id: str
    name: str
    source_version_tx: int
    start: int
    end: int
    kind: str
    snippet: str
    matches: list[ByteRange]
    page: int | None = None
    bbox: list[float] | None = None


class SearchResult(_Out):
    """``GET /v1/search``: hits best first; ``nextCursor`` is opaque, ``null`` on the last
    page; ``indexPending``: the scope's versions whose index rows were still waiting to be
    written or deleted when it answered (their text may be missing from the hits;
    docs/rest-api.md, "Search")."""

    hits: list[SearchHitOut]
    next_cursor: str | None
    index_pending: int = 0


class LocatedOut(_Out):
    """One place of ``POST /v1/locate``: ``[start, end)`` (bytes, or the request's
    ``units``) of ``sourceVersionTx``'s text holding the quote, the nodes whose span rows
    hold it; ``match`` is ``"exact"`` when those bytes are the quote's, ``"folded"`` when
    they equal it only after folding (whitespace runs, case, accents, compatibility forms,
    ignorables: docs/rest-api.md, "Locate a quote"); ``exact`` is ``match == "exact"``."""

    source_id: str
    source_version_tx: int
    start: int
    end: int
    node_ids: list[str]
    exact: bool
    match: Literal["exact", "folded"]
