"""Domain records shared by storage, ingestion and the fronts (docs/architecture.md).

Ids are 16-byte ``bytes`` inside the core and UUID strings on the wire; hashes are 32-byte
``bytes`` inside and lowercase hex on the wire; times are integers in microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

import msgspec

__all__ = [
    "TERMINAL_JOB_STATES",
    "Changes",
    "CommitOutcome",
    "Continuation",
    "Dedup",
    "Direction",
    "EdgeRecord",
    "EnqueueOutcome",
    "JobCompletion",
    "JobEvent",
    "JobEventPage",
    "JobRecord",
    "JobState",
    "LeaseRef",
    "NewJob",
    "NewVersion",
    "NodeVersion",
    "ProvenanceSpan",
    "Scope",
    "SourceVersion",
    "SpanRecord",
    "StreamOutcome",
    "StreamPart",
    "WebhookTarget",
]

#: Canonical text chunk size in bytes: text is stored in chunks of exactly 1 MiB, the last shorter.
BLOB_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Scope:
    """The isolation unit: every row carries one, every read filters by it (docs/rest-api.md)."""

    tenant_id: str
    organization_id: str


@dataclass(frozen=True, slots=True)
class NewVersion:
    """What an ingest path knows about a version before storage assigns its transaction time."""

    source_id: bytes
    name: str
    format: str
    content_hash: bytes
    size: int
    worker: str
    job_id: bytes | None = None
    #: How the bytes were read (docs/architecture.md, "Dedup, identity and versions"): the
    #: projection fingerprint and the identity JSON it hashes (``None``: not known).
    fingerprint: bytes | None = None
    identity: bytes | None = None


@dataclass(frozen=True, slots=True)
class SourceVersion:
    """A stored source version; ``text_len`` is in bytes."""

    source_id: bytes
    tx: int
    name: str
    format: str
    content_hash: bytes
    canonical_text_hash: bytes | None
    size: int
    worker: str | None
    job_id: bytes | None
    blob_id: bytes | None
    text_len: int | None
    #: When (µs) and why the version was erased (GDPR erasure), and by which erase job.
    erased_at: int | None = None
    erasure_id: bytes | None = None
    erase_reason: str | None = None
    #: When (µs) the version became its source's current graph (``None``: not published),
    #: its root node, and what its publish changed (``None`` before migration 6).
    published_tx: int | None = None
    root_node_id: bytes | None = None
    changes: Changes | None = None
    #: When (µs) and why the source was retired while this version was its current one.
    retired_tx: int | None = None
    retire_reason: str | None = None
    #: The projection fingerprint, identity JSON and why it superseded the version before
    #: it (:data:`telha.domain.dedup.REASONS`; ``None``: a first version, or written before
    #: identities).
    fingerprint: bytes | None = None
    identity: bytes | None = None
    reason: str | None = None


@dataclass(slots=True)
class Changes:
    """What a version did to its source's nodes (docs/architecture.md, "Versions and node
    identity"): ``added`` new ids, ``changed`` matched with other labels or properties,
    ``unchanged`` matched and equal, ``removed`` closed (counted at the publish)."""

    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0

    def plus(self, other: Changes) -> Changes:
        """Both counts summed."""
        return Changes(
            self.added + other.added, self.changed + other.changed,
            self.unchanged + other.unchanged, self.removed + other.removed,
        )  # fmt: skip

    def into_stats(self, stats: bytes | None) -> bytes:
        """A job's ``stats`` JSON object with these counts added (the worker's own stats
        kept)."""
        fields = msgspec.json.decode(stats) if stats else {}
        if not isinstance(fields, dict):
            fields = {"worker": fields}
        return msgspec.json.encode({**fields, **self.as_stats()})

    def detail(self) -> str:
        """The counts as the ``completed`` event's detail carries them."""
        return " ".join(f"{k}={v}" for k, v in self.as_stats().items())

    @classmethod
    def from_stats(cls, stats: dict[str, int]) -> Changes:
        """The counts back from :meth:`as_stats`'s shape (a missing count is 0)."""
        return cls(
            stats.get("nodes_added", 0), stats.get("nodes_changed", 0),
            stats.get("nodes_unchanged", 0), stats.get("nodes_removed", 0),
        )  # fmt: skip

    def as_stats(self) -> dict[str, int]:
        """The counts as a job's ``stats`` and ``completed`` event carry them."""
        return {
            "nodes_added": self.added,
            "nodes_removed": self.removed,
            "nodes_changed": self.changed,
            "nodes_unchanged": self.unchanged,
        }


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """Result of committing a version: either deduplicated (nothing written) or the new rows.

    ``erased``: a digest of the version is on the scope's blocklist; nothing was written and
    the job (if any) ended ``dead`` with reason ``erased``. ``refused_children``: names of
    child jobs refused because their content is blocklisted (the parent proceeded).
    """

    deduplicated: bool
    source_version_tx: int | None
    node_ids: list[bytes]
    edge_ids: list[bytes]
    erased: bool = False
    refused_children: tuple[str, ...] = ()
    #: What the version did to its source's nodes (``None`` when nothing was written).
    changes: Changes | None = None


@dataclass(frozen=True, slots=True)
class ProvenanceSpan:
    """A provenance span: ``[start, end)`` byte offsets into one version's canonical text."""

    source_id: bytes
    source_version_tx: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class NodeVersion:
    """One version of a node; ``tx_to``/``valid_*`` are ``None`` when unbounded."""

    node_id: bytes
    labels: list[str]
    properties: dict[str, Any]
    tx_from: int
    tx_to: int | None
    valid_from: int | None
    valid_to: int | None
    provenance: list[ProvenanceSpan]
    #: Temporal ambiguities recorded for this version (docs/formats.md), filled by ``get_node``.
    ambiguities: list[Ambiguity] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Ambiguity:
    """A temporal ambiguity of a node version: ``candidates`` best first, each
    ``{label, validFrom, validTo, span}`` (µs; ``span`` is ``[start, end]`` bytes or null);
    the node's valid time is the first candidate's interval."""

    kind: str
    candidates: list[dict[str, Any]]
    detector_confidence: float | None
    applied_candidate_confidence: float | None
    severity_hint: str | None


@dataclass(frozen=True, slots=True)
class EdgeRecord:
    """A current edge whose endpoints both exist."""

    edge_id: bytes
    type: str
    from_id: bytes
    to_id: bytes
    properties: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """A span row: a span of a version with the nodes it produced (the reverse index)."""

    start: int
    end: int
    kind: str
    linked_nodes: list[bytes]


class Direction(Enum):
    """Which edges of a node to read."""

    OUT = "out"
    IN = "in"
    BOTH = "both"


JobState = Literal["pending", "leased", "completed", "dead", "cancelled"]

#: The states a job never leaves, each reached with an event of the same name (its
#: terminal event): a reader of the job's events stops after it (docs/rest-api.md, "Live
#: events"; ``cancelled``: POST /v1/ingest/{jobId}/cancel). Every "is this job finished?"
#: question asks this one set. Each is also the name of the webhook event sent when a job
#: reaches it (in this order: a subscription's bit set, telha.domain.webhooks).
TERMINAL_JOB_STATES: tuple[str, ...] = ("completed", "dead", "cancelled")


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to enqueue: ``payload`` is the IngestJobPayload JSON (docs/worker-protocol.md)."""

    job_id: bytes
    kind: str
    format: str
    source_id: bytes
    content_hash: bytes | None
    payload: bytes
    #: The source name an ingest job was given (what job listings show); ``None`` for an
    #: erase job, which lists its source's name.
    name: str | None = None
    #: The request's own webhook (``options.webhook``), stored with the job.
    webhook: WebhookTarget | None = None
    #: The projection fingerprint the request expects (request-level dedup matches an active
    #: job of the same bytes and fingerprint); ``None``: not known (an erase job).
    fingerprint: bytes | None = None


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """Where to POST a job's JSON and on which terminal states: ``events`` is a bit set of
    :func:`telha.domain.webhooks.event_bit` values."""

    url: str
    events: int


@dataclass(frozen=True, slots=True)
class EnqueueOutcome:
    """``job_id`` of the new job, or of the pending/leased job that already covers the same
    ``(sourceId, contentHash)``; ``deduplicated`` with no ``job_id`` when the latest version
    already has these bytes."""

    deduplicated: bool
    job_id: bytes | None
    #: The content hash is on the scope's erasure blocklist: nothing was enqueued.
    erased: bool = False


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One entry of a job's append-only event list (its manifest)."""

    at: int
    transition: str
    detail: str | None


@dataclass(frozen=True, slots=True)
class JobEventPage:
    """A page of one job's events after a sequence number, and the job's state read *before*
    them (so a terminal state's event is always among the events read with or after it).

    ``events`` are ``(seq, event)`` in ``seq`` order; ``seq`` numbers a job's events from 1.
    """

    state: JobState
    events: tuple[tuple[int, JobEvent], ...]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job row; times in µs; ``attempts`` counts failed attempts."""

    job_id: bytes
    scope: Scope
    kind: str
    format: str
    source_id: bytes
    content_hash: bytes | None
    payload: bytes
    state: JobState
    attempts: int
    lease_generation: int
    lease_owner: str | None
    lease_deadline: int | None
    available_at: int
    failure_reason: str | None
    stats: bytes | None
    events: tuple[JobEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class LeaseRef:
    """Who must hold a job for a write to be accepted: the job and its lease generation."""

    job_id: bytes
    lease_generation: int


class Dedup(Enum):
    """Which dedup rule a commit applies against the source's latest version
    (docs/architecture.md, "Dedup")."""

    #: No check (streamed chains).
    NONE = "none"
    #: Request level: same raw ``content_hash`` → nothing written.
    CONTENT = "content"
    #: Submit time: same ``content_hash`` and ``canonical_text_hash``, written by another job.
    SUBMIT = "submit"


@dataclass(frozen=True, slots=True)
class JobCompletion:
    """Completes a held job in the same transaction as its version (or its dedup)."""

    lease: LeaseRef
    now_us: int
    stats: bytes | None = None
    children: tuple[NewJob, ...] = ()
    #: The submitting worker: a stream it has open under this lease makes a single shot
    #: out of sequence.
    worker_id: str = ""


@dataclass(frozen=True, slots=True)
class Continuation:
    """The continuation: the checkpoint of a streamed job (docs/architecture.md, "Streaming"),
    fenced by the worker and lease generation that wrote it. ``length`` is the accumulated
    canonical text in bytes; ``node_ids`` are those the last accepted partial created (for an
    idempotent replay)."""

    worker_id: str
    lease_generation: int
    next_seq: int
    tx: int
    blob_id: bytes
    length: int
    next_chunk: int
    node_ids: tuple[bytes, ...]
    #: What the parts so far did to the source's nodes: ``(added, changed, unchanged)``.
    changes: tuple[int, int, int] = (0, 0, 0)
    #: The version's root node, once a part wrote it.
    root: bytes | None = None


@dataclass(frozen=True, slots=True)
class StreamPart:
    """One streamed submission as the store applies it."""

    lease: LeaseRef
    worker_id: str
    seq: int
    partial: bool
    base: int
    now_us: int
    lease_us: int
    content_hash: bytes | None = None
    stats: bytes | None = None
    children: tuple[NewJob, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamOutcome:
    """What a streamed submission did: ``replay`` (a repeated last seq: nothing written, the
    same node ids), ``finalized`` (the version row now has its canonical text hash)."""

    node_ids: list[bytes]
    source_version_tx: int
    lease_deadline: int
    replay: bool = False
    finalized: bool = False
    #: A digest of the stream is blocklisted: the job ended ``dead`` (``erased``) and what
    #: the stream had written is gone.
    erased: bool = False
    refused_children: tuple[str, ...] = ()
