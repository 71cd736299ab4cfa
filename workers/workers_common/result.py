"""``IngestionResultBuilder`` (docs/worker-protocol.md, "The submission"): builds the
submission wire shape so that offsets, references and normalization are right by
construction.

Offsets are UTF-8 byte offsets into the canonical text. With ``base_offset`` (streaming), each
partial's builder carries only its newly appended text while span offsets stay global.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from workers_common.canonical import NUL, normalize_canonical, scrub_properties

__all__ = ["IngestionResultBuilder"]


class IngestionResultBuilder:
    """Accumulates canonical text, spans, nodes, relationships and extras.

    :param base_offset: byte length of the text earlier partials of the same stream sent.
    """

    def __init__(self, base_offset: int = 0) -> None:
        self.base_offset = base_offset
        self._parts: list[bytes] = []
        self._length = 0
        self._spans: list[dict[str, Any]] = []
        self._nodes: list[dict[str, Any]] = []
        self._relationships: list[dict[str, Any]] = []
        self._stats: dict[str, Any] | None = None
        self._content_hash: str | None = None
        self._children: list[dict[str, Any]] = []
        self._ambiguities: list[dict[str, Any]] = []
        self._partial: bool | None = None
        self._nul_chars = 0

    @property
    def byte_length(self) -> int:
        """Bytes of canonical text added by this builder (the next partial's base offset is
        ``base_offset + byte_length``)."""
        return self._length

    def add_text(self, text: str) -> tuple[int, int]:
        """Append ``text`` (normalized, U+0000 dropped and counted) with no span; returns its
        global ``(start, end)``."""
        if NUL in text:
            self._nul_chars += text.count(NUL)
        data = normalize_canonical(text).encode("utf-8")
        start = self.base_offset + self._length
        self._parts.append(data)
        self._length += len(data)
        return start, start + len(data)

    def add_span_text(self, text: str, kind: str = "body") -> int:
        """Append ``text`` and register it as a span of ``kind``; returns the span index."""
        start, end = self.add_text(text)
        return self._span(start, end, kind)

    def set_canonical_text(self, text: str) -> None:
        """Set the whole text at once (tabular, code); carve spans with :meth:`add_span_range`.

        :raises ValueError: text was already added.
        """
        if self._parts:
            raise ValueError("set_canonical_text() after text was added")
        self.add_text(text)

    def add_span_range(self, start: int, end: int, kind: str = "body") -> int:
        """A span over global byte offsets ``[start, end)``; returns the span index.

        :raises ValueError: the range is outside this builder's text.
        """
        if not self.base_offset <= start <= end <= self.base_offset + self._length:
            raise ValueError(f"span [{start}, {end}) is outside the text")
        return self._span(start, end, kind)

    def _span(self, start: int, end: int, kind: str) -> int:
        self._spans.append({"start": start, "end": end, "kind": kind})
        return len(self._spans) - 1

    def add_node(
        self,
        labels: list[str],
        properties: dict[str, Any] | None = None,
        spans: list[int] | None = None,
        valid_time: tuple[int | None, int | None] | None = None,
        id: str | None = None,
    ) -> int:
        """A node referencing span indices; ``id`` is a deterministic UUID (upsert), and
        ``valid_time`` a ``(from, to)`` pair in µs. U+0000 is dropped from (and counted in)
        string properties. Returns the node index."""
        props, nul = scrub_properties(dict(properties or {}))
        self._nul_chars += nul
        node: dict[str, Any] = {
            "labels": list(labels),
            "properties": props,
            "spanRefs": list(spans or []),
        }
        if id is not None:
            node["id"] = id
        if valid_time is not None:
            node["validTime"] = {"from": valid_time[0], "to": valid_time[1]}
        self._nodes.append(node)
        return len(self._nodes) - 1

    def attach_span(self, node_ref: int, span_ref: int) -> None:
        """Link span ``span_ref`` to node ``node_ref`` after the node exists."""
        self._nodes[node_ref]["spanRefs"].append(span_ref)

    def add_relationship(
        self,
        edge_type: str,
        *,
        from_ref: int | None = None,
        from_id: str | None = None,
        to_ref: int | None = None,
        to_id: str | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None:
        """An edge; each end is a node of this submission (``*_ref``) or an existing id.

        :raises ValueError: not exactly one of ``*_ref``/``*_id`` per end.
        """
        if (from_ref is None) == (from_id is None) or (to_ref is None) == (to_id is None):
            raise ValueError("give exactly one of from_ref/from_id and one of to_ref/to_id")
        rel: dict[str, Any] = {"type": edge_type, "properties": dict(properties or {})}
        for key, value in (
            ("fromRef", from_ref),
            ("fromId", from_id),
            ("toRef", to_ref),
            ("toId", to_id),
        ):
            if value is not None:
                rel[key] = value
        self._relationships.append(rel)

    def set_stats(self, stats: dict[str, Any]) -> None:
        """Free-form counters reported with the job (e.g. rows, dirty counts); the builder adds
        ``nul_chars`` (U+0000 characters dropped) when it dropped any."""
        self._stats = dict(stats)

    def count_nul(self, count: int) -> None:
        """Add ``count`` U+0000 characters a worker dropped before handing text over (they
        show in ``stats.nul_chars``)."""
        self._nul_chars += count

    def set_content_hash(self, hex_digest: str) -> None:
        """BLAKE3 hex of the bytes actually parsed (fetch formats report what they fetched)."""
        self._content_hash = hex_digest

    def add_child_job(
        self,
        format: str,
        name: str,
        options: dict[str, Any] | None = None,
        content: bytes | None = None,
        root_node_id: str | None = None,
    ) -> None:
        """Ask core to enqueue a follow-up job (attachments, crawl fan-out).

        :param root_node_id: the id (a UUID string, e.g. :func:`workers_common.ids.child_root_id`)
            the child's projection root gets when the child's worker supplies none, so this
            submission can already point an edge at it (``to_id``); the edge dangles until
            the child's version is applied.
        """
        child: dict[str, Any] = {"format": format, "name": name, "options": dict(options or {})}
        if content is not None:
            child["contentB64"] = base64.b64encode(content).decode()
        if root_node_id is not None:
            child["rootNodeId"] = root_node_id
        self._children.append(child)

    def add_ambiguity(
        self,
        node_ref: int,
        kind: str,
        candidates: list[dict[str, Any]],
        detector_confidence: float | None = None,
        applied_candidate_confidence: float | None = None,
        severity_hint: str | None = None,
    ) -> None:
        """Record a detected temporal ambiguity of node ``node_ref`` (docs/formats.md)."""
        amb: dict[str, Any] = {"nodeRef": node_ref, "kind": kind, "candidates": list(candidates)}
        if detector_confidence is not None:
            amb["detectorConfidence"] = detector_confidence
        if applied_candidate_confidence is not None:
            amb["appliedCandidateConfidence"] = applied_candidate_confidence
        if severity_hint is not None:
            amb["severityHint"] = severity_hint
        self._ambiguities.append(amb)

    def set_partial(self, partial: bool) -> None:
        """Mark this submission as a partial (``True``) or the final one (``False``)."""
        self._partial = partial

    def build(self) -> dict[str, Any]:
        """The submission dict (the wire shape); ``seq`` is assigned by the consumer."""
        out: dict[str, Any] = {
            "v": 1,
            "canonicalText": b"".join(self._parts).decode("utf-8"),
            "spans": list(self._spans),
            "nodes": list(self._nodes),
            "relationships": list(self._relationships),
        }
        if self._nul_chars:
            self._stats = {**(self._stats or {}), "nul_chars": self._nul_chars}
        if self._stats is not None:
            out["stats"] = self._stats
        if self._content_hash is not None:
            out["contentHash"] = self._content_hash
        if self._children:
            out["childJobs"] = list(self._children)
        if self._ambiguities:
            out["ambiguities"] = list(self._ambiguities)
        if self._partial is not None:
            out["partial"] = self._partial
        return out

    def to_json(self) -> bytes:
        """:meth:`build` as compact UTF-8 JSON (deterministic: insertion order, no spaces)."""
        return msgspec.json.encode(self.build())
