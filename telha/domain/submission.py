"""Worker submissions (docs/worker-protocol.md, "The submission"): decoding and validation.

Core validates every submission before anything is written: version, canonical
text already NFC/LF, offsets inside the text and on UTF-8 boundaries, span/node/edge
references in range, exactly one of ``*Ref``/``*Id``, ids are UUIDs, labels UPPER_SNAKE,
sizes bounded. A valid submission becomes a :class:`~telha.domain.projection.Projection`.
Pure; no I/O.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from typing import Any

import msgspec

from telha.domain.canonical import is_boundary, is_label, normalize_canonical
from telha.domain.projection import AmbiguityOut, EdgeOut, NodeOut, Projection, SpanOut

__all__ = [
    "ChildJobIn",
    "InvalidSubmission",
    "ProjectionIn",
    "Submission",
    "decode_submission",
    "to_projection",
]

#: Upper bounds on one submission (each partial of a stream counts on its own).
MAX_NODES = 1_000_000
MAX_EDGES = 2_000_000
MAX_SPANS = 1_000_000
MAX_TEXT_BYTES = 256 * 1024 * 1024
MAX_CHILD_JOBS = 10_000
_INT64 = (-(2**63), 2**63 - 1)
_KIND = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class InvalidSubmission(Exception):
    """A submission core refuses; the job dead-letters as ``invalid_submission``."""


class _In(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True, gc=False):
    pass


class SpanIn(_In):
    """A span: ``[start, end)`` global UTF-8 byte offsets, ``kind`` lower_snake."""

    start: int
    end: int
    kind: str


class ValidTimeIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """Valid time ``{from, to}`` in µs; ``null`` is unbounded."""

    from_: int | None = msgspec.field(default=None, name="from")
    to: int | None = None


_EMPTY_OBJECT = msgspec.Raw(b"{}")


class NodeIn(_In):
    """A node: labels, properties, span indices, an optional deterministic UUID and valid time.

    ``properties`` stays the raw JSON text as sent (checked to be an object): decoding tens of
    thousands of property maps only to encode them again would dominate a large submission.
    """

    labels: list[str]
    properties: msgspec.Raw = _EMPTY_OBJECT
    span_refs: list[int] = []
    id: str | None = None
    valid_time: ValidTimeIn | None = None


class RelationshipIn(_In):
    """An edge; each end is ``*Ref`` (node index here) or ``*Id`` (existing id), not both."""

    type: str
    from_ref: int | None = None
    from_id: str | None = None
    to_ref: int | None = None
    to_id: str | None = None
    properties: msgspec.Raw = _EMPTY_OBJECT


class ProjectionIn(_In):
    """How the submitting worker read the bytes (docs/worker-protocol.md, "Projection
    identity"): its name, projection version and the parser versions that shape its output."""

    worker: str
    version: int
    parsers: dict[str, str] = {}


class ChildJobIn(_In):
    """A follow-up job core enqueues (request-level dedup applies).

    ``root_node_id``: the id the child's projection root (its first node) gets when its
    worker supplies none, so the parent can point an edge at it before the child runs
    (email ``HAS_ATTACHMENT``); dangling until the child's version is applied."""

    format: str
    name: str
    content_b64: str | None = None
    options: dict[str, Any] = {}
    root_node_id: str | None = None


class CandidateIn(_In):
    """One reading of an ambiguous fact: a label and the valid-time interval it implies (µs),
    with the span holding its evidence."""

    label: str
    valid_from: int | None = None
    valid_to: int | None = None
    span_ref: int | None = None


class AmbiguityIn(_In):
    """A temporal ambiguity (docs/formats.md), candidates best first."""

    node_ref: int
    kind: str
    candidates: list[CandidateIn]
    detector_confidence: float | None = None
    applied_candidate_confidence: float | None = None
    severity_hint: str | None = None


class Submission(_In):
    """The wire submission (docs/worker-protocol.md) with ``seq``/``partial`` (streaming)."""

    v: int
    canonical_text: str = ""
    spans: list[SpanIn] = []
    nodes: list[NodeIn] = []
    relationships: list[RelationshipIn] = []
    stats: dict[str, Any] | None = None
    content_hash: str | None = None
    child_jobs: list[ChildJobIn] = []
    ambiguities: list[AmbiguityIn] = []
    seq: int = 0
    partial: bool = False
    projection: ProjectionIn | None = None


def decode_submission(raw: bytes) -> Submission:
    """Decode ``result_json``.

    :raises InvalidSubmission: not JSON, or not the wire shape (unknown or mistyped field).
    """
    try:
        return msgspec.json.decode(raw, type=Submission)
    except msgspec.DecodeError as exc:
        raise InvalidSubmission(f"result_json is not a submission: {exc}") from None


def _object_json(raw: msgspec.Raw, field: str, index: int, *, canonical: bool) -> bytes:
    """The JSON text of a properties object. ``canonical`` (nodes with a deterministic id, which
    the upsert ladder compares): re-encoded with sorted keys, so the same properties in another
    order are the same version. Otherwise the text as sent, which msgspec has checked is JSON.

    :param field: ``nodes`` or ``relationships``, and ``index``: where, for the error message.
    :raises InvalidSubmission: not a JSON object.
    """
    data = bytes(raw)
    if not data.startswith(b"{"):
        raise InvalidSubmission(f"{field}[{index}].properties must be a JSON object")
    if canonical:
        return msgspec.json.encode(msgspec.json.decode(data), order="sorted")
    return data


def _uuid(value: str, where: str) -> bytes:
    try:
        return uuid.UUID(value).bytes
    except ValueError:
        raise InvalidSubmission(f"{where}: {value!r} is not a UUID") from None


def _spans(sub: Submission, text: bytes, base: int, earlier: list[int]) -> list[SpanOut]:
    if len(sub.spans) > MAX_SPANS:
        raise InvalidSubmission(f"{len(sub.spans)} spans is over the limit of {MAX_SPANS}")
    total = base + len(text)
    out = []
    kinds: set[str] = set()  # kinds already checked (a stream has a handful)
    for i, sp in enumerate(sub.spans):
        start, end, kind = sp.start, sp.end, sp.kind
        if not 0 <= start <= end <= total:
            raise InvalidSubmission(
                f"spans[{i}]: [{start}, {end}) is outside the text ({total} bytes)"
            )
        for pos in (start, end):
            if pos < base:
                earlier.append(pos)
            elif not is_boundary(text, pos - base):
                raise InvalidSubmission(
                    f"spans[{i}]: offsets are not on UTF-8 character boundaries"
                )
        if kind not in kinds:
            if not _KIND.match(kind):
                raise InvalidSubmission(f"spans[{i}]: kind {kind!r} is not a lower_snake name")
            kinds.add(kind)
        out.append(SpanOut(start, end, kind))
    return out


def _check_valid_time(i: int, vt: ValidTimeIn) -> None:
    for bound in (vt.from_, vt.to):
        if bound is not None and not _INT64[0] <= bound <= _INT64[1]:
            raise InvalidSubmission(f"nodes[{i}]: validTime {bound} is not a 64-bit µs time")
    if vt.from_ is not None and vt.to is not None and vt.to < vt.from_:
        raise InvalidSubmission(f"nodes[{i}]: validTime ends before it starts")


def _nodes(sub: Submission) -> list[NodeOut]:
    """Validated nodes. The loop runs once per node of submissions of tens of thousands:
    label sets are checked once each, and error messages are built only on error."""
    if len(sub.nodes) > MAX_NODES:
        raise InvalidSubmission(f"{len(sub.nodes)} nodes is over the limit of {MAX_NODES}")
    out = []
    seen: set[bytes] = set()
    n_spans = len(sub.spans)
    label_sets: dict[tuple[str, ...], tuple[str, ...]] = {}
    for i, node in enumerate(sub.nodes):
        labels = tuple(node.labels)
        if labels not in label_sets:
            if not labels or not all(is_label(label) for label in labels):
                raise InvalidSubmission(f"nodes[{i}]: labels must be non-empty UPPER_SNAKE names")
            if len(set(labels)) != len(labels):  # found by fuzzing: a storage error before
                raise InvalidSubmission(f"nodes[{i}]: labels must be distinct")
            label_sets[labels] = labels
        refs = tuple(node.span_refs)
        for ref in refs:
            if not 0 <= ref < n_spans:
                raise InvalidSubmission(f"nodes[{i}]: spanRef {ref} is out of range")
        node_id = None
        if node.id is not None:
            node_id = _uuid(node.id, f"nodes[{i}].id")
            if node_id in seen:
                raise InvalidSubmission(f"nodes[{i}]: id {node.id} appears twice")
            seen.add(node_id)
            props = _object_json(node.properties, "nodes", i, canonical=True)
        else:
            props = _object_json(node.properties, "nodes", i, canonical=False)
        vt = node.valid_time
        if vt is None:
            out.append(NodeOut(label_sets[labels], props, refs, node_id))
        else:
            _check_valid_time(i, vt)
            out.append(NodeOut(label_sets[labels], props, refs, node_id, vt.from_, vt.to))
    return out


def _edges(sub: Submission) -> list[EdgeOut]:
    """Validated edges; types and ids many edges share (a table's) are checked once."""
    if len(sub.relationships) > MAX_EDGES:
        raise InvalidSubmission(f"{len(sub.relationships)} relationships is over {MAX_EDGES}")
    n_nodes = len(sub.nodes)
    out = []
    known: dict[str, bytes] = {}
    types: set[str] = set()
    for i, rel in enumerate(sub.relationships):
        if rel.type not in types:
            if not is_label(rel.type):
                raise InvalidSubmission(f"relationships[{i}]: type {rel.type!r} is not UPPER_SNAKE")
            types.add(rel.type)
        ends: list[tuple[int | None, bytes | None]] = []
        for side, ref, id_ in (("from", rel.from_ref, rel.from_id), ("to", rel.to_ref, rel.to_id)):
            if (ref is None) == (id_ is None):
                raise InvalidSubmission(
                    f"relationships[{i}]: exactly one of {side}Ref and {side}Id"
                )
            if id_ is None:
                if not 0 <= ref < n_nodes:  # type: ignore[operator]
                    raise InvalidSubmission(f"relationships[{i}]: {side}Ref {ref} is out of range")
                ends.append((ref, None))
            else:
                parsed = known.get(id_)
                if parsed is None:
                    parsed = known[id_] = _uuid(id_, f"relationships[{i}].{side}Id")
                ends.append((None, parsed))
        (from_ref, from_id), (to_ref, to_id) = ends
        props = _object_json(rel.properties, "relationships", i, canonical=False)
        out.append(EdgeOut(rel.type, from_ref, to_ref, props, from_id, to_id))
    return out


def _confidence(value: float | None, where: str) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise InvalidSubmission(f"{where} must be within [0, 1]")
    return value


def _ambiguities(sub: Submission, nodes: list[NodeOut], spans: list[SpanOut]) -> list[AmbiguityOut]:
    """Validate ambiguities and apply each one's first candidate interval to its node's valid
    time (``nodes`` is updated in place; a first candidate with neither bound, e.g. for an
    undated document, leaves the node's own valid time). At most one ambiguity per node (v1).
    """
    out: list[AmbiguityOut] = []
    seen: set[int] = set()
    for i, amb in enumerate(sub.ambiguities):
        where = f"ambiguities[{i}]"
        if not 0 <= amb.node_ref < len(nodes):
            raise InvalidSubmission(f"{where}: nodeRef {amb.node_ref} is out of range")
        if amb.node_ref in seen:
            raise InvalidSubmission(f"{where}: node {amb.node_ref} already has an ambiguity")
        seen.add(amb.node_ref)
        if not _KIND.match(amb.kind):
            raise InvalidSubmission(f"{where}: kind {amb.kind!r} is not a lower_snake name")
        if not amb.candidates:
            raise InvalidSubmission(f"{where}: at least one candidate is required")
        candidates: list[dict[str, Any]] = []
        for j, c in enumerate(amb.candidates):
            cw = f"{where}.candidates[{j}]"
            for bound in (c.valid_from, c.valid_to):
                if bound is not None and not _INT64[0] <= bound <= _INT64[1]:
                    raise InvalidSubmission(f"{cw}: {bound} is not a 64-bit µs time")
            if c.valid_from is not None and c.valid_to is not None and c.valid_to < c.valid_from:
                raise InvalidSubmission(f"{cw}: validTo is before validFrom")
            span = None
            if c.span_ref is not None:
                if not 0 <= c.span_ref < len(spans):
                    raise InvalidSubmission(f"{cw}: spanRef {c.span_ref} is out of range")
                span = [spans[c.span_ref].start, spans[c.span_ref].end]
            candidates.append(
                {"label": c.label, "validFrom": c.valid_from, "validTo": c.valid_to, "span": span}
            )
        first = amb.candidates[0]
        if first.valid_from is not None or first.valid_to is not None:
            node = nodes[amb.node_ref]
            nodes[amb.node_ref] = node._replace(
                valid_from=first.valid_from, valid_to=first.valid_to
            )
        out.append(
            AmbiguityOut(
                amb.node_ref,
                amb.kind,
                msgspec.json.encode(candidates),
                _confidence(amb.detector_confidence, f"{where}.detectorConfidence"),
                _confidence(
                    amb.applied_candidate_confidence, f"{where}.appliedCandidateConfidence"
                ),
                amb.severity_hint,
            )
        )
    return out


def to_projection(sub: Submission, base: int = 0) -> Projection:
    """Validate ``sub`` and turn it into a :class:`Projection`.

    :param base: bytes of canonical text earlier partials of the same stream appended; span
        offsets are global, so they may reach back into that text (0 for single shot).
    :raises InvalidSubmission: any rule of the module docstring broken; names the field.
    """
    if sub.v != 1:
        raise InvalidSubmission(f"unsupported submission version v={sub.v}")
    if normalize_canonical(sub.canonical_text) != sub.canonical_text:
        raise InvalidSubmission("canonicalText is not normalized (NFC, LF line endings)")
    try:
        text = sub.canonical_text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidSubmission("canonicalText holds a lone surrogate") from None
    if base and sub.canonical_text and unicodedata.combining(sub.canonical_text[0]):
        # NFC of the joined text could differ from the parts': split streams on characters.
        raise InvalidSubmission("a streamed part may not start with a combining mark")
    if len(text) > MAX_TEXT_BYTES:
        raise InvalidSubmission(f"canonicalText is over {MAX_TEXT_BYTES} bytes: stream it")
    if len(sub.child_jobs) > MAX_CHILD_JOBS:
        raise InvalidSubmission(f"more than {MAX_CHILD_JOBS} childJobs")
    if sub.content_hash is not None and not _HEX64.match(sub.content_hash):
        raise InvalidSubmission("contentHash must be 64 lowercase hex characters (BLAKE3)")
    earlier: list[int] = []
    spans = _spans(sub, text, base, earlier)
    nodes = _nodes(sub)
    ambiguities = _ambiguities(sub, nodes, spans)
    return Projection(text, spans, nodes, _edges(sub), base, earlier, ambiguities)
