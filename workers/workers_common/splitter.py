"""Stream one large submission as partials (docs/worker-protocol.md, "Streaming partials")
when a worker builds the whole projection at once (docling)
but core should not receive it in one piece.

:func:`stream_submission` cuts the canonical text after a blank line (a block boundary) every
``part_bytes`` bytes or so, and sends each node in the partial whose text holds the end of its
last span (a node spanning the whole document, the DOCUMENT, goes last); spans may reach back
into text earlier partials sent. An edge goes in the partial where its later endpoint is; an
endpoint sent earlier is addressed by the id core returned for it. Ambiguities travel with
their node; ``stats``, ``contentHash`` and ``childJobs`` with the final partial. The partials
together are the same projection as the single submission: same text, nodes, edges, spans.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Generator
from typing import Any

__all__ = ["PART_BYTES", "stream_submission"]

#: Target canonical-text bytes per partial (submissions over ~2 MiB stream).
PART_BYTES = 2 * 1024 * 1024

_FINAL_KEYS = ("stats", "contentHash", "childJobs")


def _cuts(text: bytes, part_bytes: int) -> list[int]:
    """Byte offsets where partials start: 0, then just after a blank line near every
    ``part_bytes`` (never before a combining mark); the text's length last."""
    cuts = [0]
    while len(text) - cuts[-1] > part_bytes:
        target = cuts[-1] + part_bytes
        cut = text.rfind(b"\n\n", cuts[-1] + 1, target)
        if cut == -1:
            cut = text.find(b"\n\n", target)
            if cut == -1:
                break
        cut += 2
        head = text[cut : cut + 4].decode("utf-8", "ignore")[:1]
        if not head or unicodedata.combining(head):
            break
        cuts.append(cut)
    cuts.append(len(text))
    return cuts


def _part_of(offset: int, cuts: list[int]) -> int:
    """The partial whose text holds byte ``offset - 1`` (0 for offset 0)."""
    for k in range(len(cuts) - 1):
        if offset <= cuts[k + 1]:
            return k
    return len(cuts) - 2


def _edge_part(rel: dict[str, Any], node_part: list[int]) -> int:
    """The partial of an edge: that of its later node reference (0 with ids only)."""
    return max((node_part[rel[k]] for k in ("fromRef", "toRef") if k in rel), default=0)


class _Part:
    """One partial under construction: its spans (re-indexed) and its nodes' local refs."""

    def __init__(self, spans: list[dict[str, Any]]) -> None:
        self._all_spans = spans
        self.spans: list[dict[str, Any]] = []
        self._span_index: dict[int, int] = {}
        self.local: dict[int, int] = {}  # original node index → index in this partial
        self.nodes: list[dict[str, Any]] = []

    def span_ref(self, original: int) -> int:
        if original not in self._span_index:
            self._span_index[original] = len(self.spans)
            self.spans.append(self._all_spans[original])
        return self._span_index[original]

    def add_node(self, original: int, node: dict[str, Any]) -> None:
        self.local[original] = len(self.nodes)
        refs = [self.span_ref(r) for r in node.get("spanRefs", [])]
        self.nodes.append({**node, "spanRefs": refs})

    def edge(self, rel: dict[str, Any], ids: dict[int, str]) -> dict[str, Any]:
        moved = {key: v for key, v in rel.items() if key not in ("fromRef", "toRef")}
        for side in ("from", "to"):
            ref = rel.get(f"{side}Ref")
            if ref is None:
                continue
            if ref in self.local:
                moved[f"{side}Ref"] = self.local[ref]
            else:  # sent in an earlier partial: addressed by the id core returned
                moved[f"{side}Id"] = ids[ref]
        return moved

    def ambiguity(self, amb: dict[str, Any]) -> dict[str, Any]:
        cands = [
            {**c, "spanRef": self.span_ref(c["spanRef"])} if "spanRef" in c else c
            for c in amb["candidates"]
        ]
        return {**amb, "nodeRef": self.local[amb["nodeRef"]], "candidates": cands}


def stream_submission(
    sub: dict[str, Any], part_bytes: int = PART_BYTES
) -> Generator[dict[str, Any], Any, None]:
    """Yield ``sub`` as partial submissions (the last with ``partial: False``), receiving the
    node ids core assigned to each (``ids = yield part``); see the module docstring. A text
    under ``part_bytes`` is yielded whole, once."""
    text = sub.get("canonicalText", "").encode()
    cuts = _cuts(text, part_bytes)
    if len(cuts) <= 2:
        yield {**sub, "partial": False}
        return
    spans = sub.get("spans", [])
    nodes = sub.get("nodes", [])
    rels = sub.get("relationships", [])
    node_part = [
        _part_of(max((spans[r]["end"] for r in n.get("spanRefs", [])), default=0), cuts)
        for n in nodes
    ]
    edge_part = [_edge_part(rel, node_part) for rel in rels]
    ids: dict[int, str] = {}
    for k in range(len(cuts) - 1):
        part = _Part(spans)
        for i, node in enumerate(nodes):
            if node_part[i] == k:
                part.add_node(i, node)
        out: dict[str, Any] = {
            "v": sub.get("v", 1),
            "canonicalText": text[cuts[k] : cuts[k + 1]].decode(),
            "relationships": [
                part.edge(rel, ids) for rel, p in zip(rels, edge_part, strict=True) if p == k
            ],
            "partial": k < len(cuts) - 2,
        }
        ambs = [part.ambiguity(a) for a in sub.get("ambiguities", []) if a["nodeRef"] in part.local]
        out["spans"], out["nodes"] = part.spans, part.nodes
        if ambs:
            out["ambiguities"] = ambs
        if not out["partial"]:
            out.update({key: sub[key] for key in _FINAL_KEYS if key in sub})
        returned = yield out
        if returned is not None:
            ids.update({original: returned[pos] for original, pos in part.local.items()})
