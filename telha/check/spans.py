"""Provenance checks (spans and span rows): ``spans_in_text`` and ``span_links``.

- ``spans_in_text``: every node version's provenance span, and every span row, lies inside its
  finalized version's canonical text (``0 <= start <= end <= text_len``) with both ends on UTF-8
  boundaries. Rows of a version that is not finalized (an open or abandoned stream) have no
  final text to resolve against; ``orphan_versions`` checks that those are hidden.
- ``span_links``: the forward and reverse indexes agree. Each span a node version's
  provenance names has a span row in that version linking the node; each node a span row
  links either has a version written at that row's tx whose provenance names the span, or
  has no version at that tx at all (the upsert ladder kept its unchanged earlier version,
  docs/architecture.md), but exists.

Two passes, both in pages: node versions by key, then span rows in document order.
"""

from __future__ import annotations

import msgspec

from telha.check.context import CheckContext, TextBytes, VersionCache
from telha.domain.ids import id_str
from telha.domain.scan import ScanNode, ScanSpan, ScanVersion

__all__ = ["SpanChecks", "spans_of"]

IN_TEXT = "spans_in_text"
LINKS = "span_links"

_provenance = msgspec.json.Decoder(list[list[int]])


def _node_subject(ctx: CheckContext, n: ScanNode) -> str:
    return f"node {id_str(n.node_id)}@{n.tx_from} ({ctx.where(n.scope)})"


def _span_subject(ctx: CheckContext, s: ScanSpan) -> str:
    return f"span [{s.start}, {s.end}) of {ctx.version_subject(s.scope, s.source_id, s.tx)}"


async def _in_text(
    ctx: CheckContext, text: TextBytes, v: ScanVersion, subject: str, start: int, end: int
) -> None:
    """Report ``[start, end)`` of ``v`` if outside its text or off a UTF-8 boundary."""
    ctx.report.count(IN_TEXT)
    length = v.text_len or 0
    if not 0 <= start <= end <= length:
        ctx.report.add(IN_TEXT, subject, f"[{start}, {end}) is outside the text ({length} bytes)")
        return
    for pos in (start, end):
        ok = await text.on_boundary(v, pos)
        if ok is None:
            ctx.report.add(IN_TEXT, subject, f"the text chunk holding byte {pos} is missing")
            return
        if not ok:
            ctx.report.add(IN_TEXT, subject, f"offset {pos} is inside a UTF-8 character")
            return


def spans_of(provenance: bytes, tx_from: int) -> list[tuple[int, int, int]] | None:
    """A node version's stored ``provenance`` as ``(start, end, version tx)`` spans — the
    stored ``[start, end]`` is into the version that wrote the node (``tx_from``),
    ``[start, end, tx]`` into version ``tx`` (a version an erasure appended keeps its
    surviving spans' versions; :func:`telha.domain.records.node_record` reads them the same
    way); ``None`` when the stored JSON is neither."""
    try:
        raw = _provenance.decode(provenance)
    except msgspec.DecodeError:
        return None
    if any(len(p) not in (2, 3) for p in raw):
        return None
    return [(p[0], p[1], p[2] if len(p) == 3 else tx_from) for p in raw]


def _linked(s: ScanSpan) -> list[bytes] | None:
    ids = s.linked_nodes
    if len(ids) % 16:
        return None
    return [ids[i : i + 16] for i in range(0, len(ids), 16)]


class SpanChecks:
    """The ``spans_in_text`` and ``span_links`` checks (see the module docstring)."""

    names: tuple[str, ...] = (IN_TEXT, LINKS)

    async def run(self, ctx: CheckContext) -> None:
        """Both passes over the snapshot."""
        versions = VersionCache(ctx.scan)
        text = TextBytes(ctx.scan)
        async for nodes in ctx.scan.nodes(ctx.page):
            await self._node_page(ctx, versions, text, nodes)
        async for spans in ctx.scan.span_rows(ctx.page):
            await self._span_page(ctx, versions, text, spans)

    async def _node_page(
        self, ctx: CheckContext, versions: VersionCache, text: TextBytes, nodes: list[ScanNode]
    ) -> None:
        decoded: list[tuple[ScanNode, bytes, list[tuple[int, int, int]]]] = []
        for n in nodes:
            spans = spans_of(n.provenance, n.tx_from)
            if spans is None:
                detail = "provenance is not a JSON list of [start, end(, tx)] spans"
                ctx.report.count(IN_TEXT)
                ctx.report.add(IN_TEXT, _node_subject(ctx, n), detail)
            elif spans and n.source_id is None:
                ctx.report.count(IN_TEXT)
                ctx.report.add(IN_TEXT, _node_subject(ctx, n), "provenance spans but no source")
            elif spans and n.source_id is not None:
                decoded.append((n, n.source_id, spans))
        found = await versions.get_many(
            {(n.scope, src, tx) for n, src, spans in decoded for _, _, tx in spans}
        )
        span_keys = {(n.scope, src, tx, a, b) for n, src, spans in decoded for a, b, tx in spans}
        rows = {
            (s.scope, s.source_id, s.tx, s.start, s.end): s
            for s in await ctx.scan.span_rows_at(list(span_keys))
        }
        for n, src, spans in decoded:
            subject = _node_subject(ctx, n)
            for a, b, tx in spans:
                v = found[(n.scope, src, tx)]
                if v is None:
                    ctx.report.count(IN_TEXT)
                    detail = f"its version {id_str(src)}@{tx} does not exist"
                    ctx.report.add(IN_TEXT, subject, detail)
                    continue
                if v.canonical_text_hash is not None:
                    await _in_text(ctx, text, v, subject, a, b)
                ctx.report.count(LINKS)
                row = rows.get((n.scope, src, tx, a, b))
                if row is None:
                    ctx.report.add(LINKS, subject, f"no span row for its span [{a}, {b})")
                elif n.node_id not in (_linked(row) or ()):
                    detail = f"the span row [{a}, {b}) does not link this node"
                    ctx.report.add(LINKS, subject, detail)

    async def _span_page(
        self, ctx: CheckContext, versions: VersionCache, text: TextBytes, spans: list[ScanSpan]
    ) -> None:
        found = await versions.get_many((s.scope, s.source_id, s.tx) for s in spans)
        links: list[tuple[ScanSpan, list[bytes]]] = []
        for s in spans:
            subject = _span_subject(ctx, s)
            v = found[(s.scope, s.source_id, s.tx)]
            if v is None:
                ctx.report.count(LINKS)
                ctx.report.add(LINKS, subject, "the span row's version does not exist")
                continue
            if v.canonical_text_hash is not None:
                await _in_text(ctx, text, v, subject, s.start, s.end)
            linked = _linked(s)
            if linked is None:
                ctx.report.count(LINKS)
                ctx.report.add(LINKS, subject, "linked_nodes is not a list of 16-byte ids")
                continue
            links.append((s, linked))
        keys = list({(s.scope, nid, s.tx) for s, linked in links for nid in linked})
        at_tx = {(n.scope, n.node_id, n.tx_from): n for n in await ctx.scan.nodes_at(keys)}
        absent = list({(scope, nid) for scope, nid, tx in keys if (scope, nid, tx) not in at_tx})
        exists = await ctx.scan.node_exists(absent) if absent else set()
        for s, linked in links:
            for nid in linked:
                ctx.report.count(LINKS)
                node = at_tx.get((s.scope, nid, s.tx))
                if node is None:
                    if (s.scope, nid) not in exists:
                        detail = f"links node {id_str(nid)}, which does not exist"
                        ctx.report.add(LINKS, _span_subject(ctx, s), detail)
                    continue
                names = node.source_id == s.source_id and (s.start, s.end, s.tx) in (
                    spans_of(node.provenance, node.tx_from) or ()
                )
                if not names:
                    detail = f"links node {id_str(nid)}, whose version at {s.tx} does not name it"
                    ctx.report.add(LINKS, _span_subject(ctx, s), detail)
