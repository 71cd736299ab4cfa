"""The rows a whole-store scan returns, for ``telha check`` (docs/operations.md, "telha
check"; the scan itself is :class:`telha.storage.core.scan.Scan`).

Rows come back nearly as stored (JSON and packed id columns undecoded), so a corrupt value is
something the checks can report rather than a decoding error. ``scope`` is the engine's
interned scope number; ``Scan.scopes`` names them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ScanCurrentNode",
    "ScanCurrentVersions",
    "ScanEdge",
    "ScanEvent",
    "ScanJob",
    "ScanNode",
    "ScanOpenRows",
    "ScanRetired",
    "ScanSourceRow",
    "ScanSpan",
    "ScanVersion",
]


@dataclass(frozen=True, slots=True)
class ScanVersion:
    """One ``source_versions`` row. ``tx`` µs; ``text_len`` bytes (0 while a stream is open);
    ``canonical_text_hash`` ``None`` for a streamed version not (or never) finalized;
    ``erased_at`` µs, ``None`` unless the version was erased (its text chunks are redaction
    records since, no bytes); ``published_tx`` µs, when the version became its source's
    current graph (``None``: never, an open or abandoned stream); ``retired_tx`` µs, when its
    source was retired while it was the current version (docs/architecture.md, "Versions and
    node identity")."""

    scope: int
    source_id: bytes
    tx: int
    name: str
    format: str
    content_hash: bytes
    canonical_text_hash: bytes | None
    worker: str | None
    job_id: bytes | None
    blob_id: bytes | None
    text_len: int | None
    erased_at: int | None = None
    published_tx: int | None = None
    retired_tx: int | None = None
    #: Its projection fingerprint, identity JSON (text) and reason (docs/architecture.md,
    #: "Dedup, identity and versions"); ``None`` on versions written before identities.
    fingerprint: bytes | None = None
    identity: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ScanNode:
    """One node version row: ``provenance`` is the stored JSON, undecoded: ``[start, end]``
    spans are UTF-8 byte offsets into the version ``(source_id, tx_from)``, ``[start, end, tx]``
    into ``(source_id, tx)`` (the version an erasure appends keeps its surviving spans')."""

    scope: int
    node_id: bytes
    tx_from: int
    tx_to: int | None
    source_id: bytes | None
    provenance: bytes


@dataclass(frozen=True, slots=True)
class ScanSpan:
    """One span reverse-index row; ``linked_nodes`` is the stored concatenation of 16-byte
    node ids."""

    scope: int
    source_id: bytes
    tx: int
    start: int
    end: int
    kind: str
    linked_nodes: bytes


@dataclass(frozen=True, slots=True)
class ScanEdge:
    """An edge version's identity and transaction-time interval (µs)."""

    scope: int
    edge_id: bytes
    tx_from: int
    tx_to: int | None


@dataclass(frozen=True, slots=True)
class ScanJob:
    """One job row (payload left out); ``continuation`` is the stored streaming checkpoint
    (msgpack), ``lease_deadline`` µs."""

    job_id: bytes
    scope: int
    kind: str
    format: str
    source_id: bytes
    content_hash: bytes | None
    state: str
    attempts: int
    lease_generation: int
    lease_owner: str | None
    lease_deadline: int | None
    failure_reason: str | None
    continuation: bytes | None


@dataclass(frozen=True, slots=True)
class ScanEvent:
    """One job event (``seq`` 1-based, in order)."""

    job_id: bytes
    seq: int
    transition: str
    detail: str | None


@dataclass(frozen=True, slots=True)
class ScanCurrentVersions:
    """One source's current rows (node and edge rows the visibility rule shows now) that a
    version wrote: how many distinct versions wrote them (``versions``; 1 when sound), the
    oldest and newest of those versions' txs (µs), and the source's current version — its
    latest published version that is not erased — (``current_tx``, ``None`` when there is
    none) with its ``retired_tx`` (µs, ``None`` unless the source is retired). Rows written by
    no version (an erasure's or a supersede's trimmed node versions) are not counted."""

    scope: int
    source_id: bytes
    versions: int
    first_tx: int
    last_tx: int
    current_tx: int | None
    retired_tx: int | None


@dataclass(frozen=True, slots=True)
class ScanCurrentNode:
    """One current node version (shown by the visibility rule now), its stored provenance
    (undecoded, as :class:`ScanNode`), and its source's current version (``current_tx``,
    ``retired_tx``: as in :class:`ScanCurrentVersions`)."""

    scope: int
    node_id: bytes
    tx_from: int
    source_id: bytes | None
    provenance: bytes
    current_tx: int | None
    retired_tx: int | None


@dataclass(frozen=True, slots=True)
class ScanOpenRows:
    """How many node and edge rows version ``(source_id, tx)`` wrote are still open
    (``tx_to`` NULL)."""

    scope: int
    source_id: bytes
    tx: int
    nodes: int
    edges: int


@dataclass(frozen=True, slots=True)
class ScanRetired:
    """A retired source: its current version ``tx``, when it was retired (``retired_tx``,
    µs), and how many of its node and edge rows the visibility rule still shows now."""

    scope: int
    source_id: bytes
    tx: int
    retired_tx: int
    nodes: int
    edges: int


@dataclass(frozen=True, slots=True)
class ScanSourceRow:
    """One ``sources`` row as ``telha check`` sees it: its ``last_job_id``, whether that job
    exists as a job of this source (``job_found``), and whether the source has any version
    row (published or not)."""

    scope: int
    source_id: bytes
    state: str
    last_job_id: bytes | None
    job_found: bool
    has_version: bool
