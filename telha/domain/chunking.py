"""Retrieval chunks of a version's canonical text (docs/rest-api.md, "Chunks").

Deterministic: the same text, spans, nodes and parameters give the same chunks. The rules:

1. **Units.** The spans are nested into a tree (a span inside another is its child). A span
   of at most ``max_bytes`` is one unit, with everything inside it — unless, with
   ``within=section``, a top-level section starts strictly inside it. A longer span (the
   DOCUMENT's body, a large table) is opened: its children are units, and so are the runs of
   its own text between them that are not whitespace. A longer span without children is cut
   into pieces of at most ``max_bytes``: at the last sentence end that fits, else at the last
   whitespace, else at the last extended grapheme cluster boundary (UAX #29: never inside
   an emoji sequence, a letter with its marks or a Hangul syllable's jamo), else — a single
   cluster longer than ``max_bytes`` — at the last UTF-8 character boundary.
2. **Packing.** Units are packed greedily in reading order into chunks of at most
   ``max_bytes`` (the chunk's text, a repeated header included). A chunk never starts or
   ends inside a unit, so it never cuts inside a span that fits; a SECTION heading that
   would be a chunk's last unit opens the next chunk instead.
3. **Sections.** With ``within="section"`` (the default) a chunk never crosses the start of
   a top-level SECTION: one no open section of a lower ``level`` contains. Sections nest by
   level in reading order, as the workers nest them.
4. **Tables.** A chunk that starts with a data row of a table whose header is not in it
   gets the header's line(s) first: ``text`` is the header's bytes (with their line end)
   then the chunk's own bytes, and the header's range is the chunk's second range.
   A header longer than half of ``max_bytes`` is not repeated.
5. **Overlap.** A chunk after the first of its section starts up to ``overlap`` bytes
   before the previous chunk's end, at the first word start (after whitespace, or a unit
   start) in reach, else the first grapheme cluster boundary; never before the section.

Pure: no I/O.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Literal

import regex

__all__ = [
    "MAX_CHUNKED_TEXT_BYTES",
    "MAX_CHUNK_BYTES",
    "MIN_CHUNK_BYTES",
    "Chunk",
    "ChunkNode",
    "ChunkSpan",
    "Within",
    "chunk_text",
    "chunk_texts",
]

#: ``maxBytes`` bounds (docs/rest-api.md): below 64 bytes a chunk is no retrieval unit.
MIN_CHUNK_BYTES = 64
MAX_CHUNK_BYTES = 1024 * 1024
#: The largest version text the chunks route cuts (bytes): cutting holds the whole text, its
#: span rows and node facts in memory, about 7 µs and a few hundred bytes per span.
MAX_CHUNKED_TEXT_BYTES = 16 * 1024 * 1024
Within = Literal["section", "document"]

_SENTENCE_END = re.compile(rb"(?:[.!?]['\")\]]*(?=\s)|\xe3\x80\x82|\xef\xbc\x81|\xef\xbc\x9f)")
_SPACE = re.compile(rb"\s+")
_WS = frozenset(b" \t\n\r\f\v")


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """A span row of the version: bytes ``[start, end)``, its kind, the nodes it holds."""

    start: int
    end: int
    kind: str
    node_ids: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class ChunkNode:
    """What chunking needs of a node of the version: its labels, a SECTION's ``title`` and
    ``level``, the ``page`` (1-based) a worker placed it on."""

    labels: tuple[str, ...] = ()
    title: str | None = None
    level: int | None = None
    page: int | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: its own bytes ``[start, end)``; ``header``, the range of a table header
    repeated before them (``text`` is the header's bytes then the chunk's); the SECTION
    titles above its first byte; its first and last page (``None``: no node of it has a
    page); the nodes of the spans it overlaps, in reading order."""

    index: int
    start: int
    end: int
    header: tuple[int, int] | None
    heading_path: tuple[str, ...]
    pages: tuple[int, int] | None
    node_ids: tuple[bytes, ...]


@dataclass(slots=True)
class _Span:
    start: int
    end: int
    kind: str
    nodes: tuple[bytes, ...]
    children: list[_Span] = field(default_factory=list)
    #: Opened (too long): its nodes are not every chunk's.
    opened: bool = False


@dataclass(frozen=True, slots=True)
class _Unit:
    start: int
    end: int


def chunk_text(
    text: bytes,
    spans: list[ChunkSpan],
    nodes: dict[bytes, ChunkNode],
    *,
    max_bytes: int,
    overlap: int = 0,
    within: Within = "section",
) -> list[Chunk]:
    """The chunks of ``text`` (a version's canonical text) with its span rows ``spans`` and
    its nodes ``nodes`` (by id), per the module's rules.

    :param max_bytes: the most bytes a chunk's text holds (``MIN_CHUNK_BYTES`` to
        ``MAX_CHUNK_BYTES``).
    :param overlap: bytes a chunk may repeat of the one before it (at most half of
        ``max_bytes``).
    :raises ValueError: ``max_bytes`` or ``overlap`` out of bounds.
    """
    if not MIN_CHUNK_BYTES <= max_bytes <= MAX_CHUNK_BYTES:
        raise ValueError(f"max_bytes must be {MIN_CHUNK_BYTES}..{MAX_CHUNK_BYTES}")
    if not 0 <= overlap <= max_bytes // 2:
        raise ValueError("overlap must be 0..max_bytes/2")
    if not text.strip():
        return []
    return _Chunker(text, spans, nodes, max_bytes, overlap, within).run()


def chunk_texts(text: bytes, chunks: list[Chunk]) -> list[bytes]:
    """Each chunk's text: its header's bytes (when repeated) then its own."""
    out = []
    for c in chunks:
        body = text[c.start : c.end]
        out.append(body if c.header is None else text[c.header[0] : c.header[1]] + body)
    return out


class _Chunker:
    def __init__(
        self,
        text: bytes,
        spans: list[ChunkSpan],
        nodes: dict[bytes, ChunkNode],
        max_bytes: int,
        overlap: int,
        within: Within,
    ) -> None:
        self.text = text
        self.max = max_bytes
        self.overlap = overlap
        self.nodes = nodes
        size = len(text)
        ordered = sorted(
            (s for s in spans if 0 <= s.start < s.end <= size),
            key=lambda s: (s.start, -s.end),
        )
        self.spans = [_Span(s.start, s.end, s.kind, s.node_ids) for s in ordered]
        self.roots = _nest(self.spans)
        self.heads, self.paths, top = _sections(self.spans, nodes)
        self.head_set = frozenset(self.heads)
        self.bounds = sorted(set(top)) if within == "section" else []
        self.row_header: dict[int, tuple[int, int]] = {}
        self._tables(self.roots)

    # -- units -------------------------------------------------------------------------

    def _atomic(self, s: _Span) -> bool:
        if s.end - s.start > self.max:
            return False
        i = bisect_right(self.bounds, s.start)
        return i >= len(self.bounds) or self.bounds[i] >= s.end

    def _units(self, children: list[_Span], lo: int, hi: int, out: list[_Unit]) -> None:
        pos = lo
        for s in children:
            if s.start > pos:
                self._loose(pos, s.start, out)
            if self._atomic(s):
                out.append(_Unit(s.start, s.end))
            elif s.children:
                s.opened = True
                self._units(s.children, s.start, s.end, out)
            else:
                self._pieces(s.start, s.end, out)
            pos = max(pos, s.end)
        if hi > pos:
            self._loose(pos, hi, out)

    def _loose(self, lo: int, hi: int, out: list[_Unit]) -> None:
        """Text between spans: its runs between section starts, without edge whitespace."""
        if hi - lo < 8 and self.text[lo:hi].isspace():  # the usual line break or blank line
            return
        cuts = [b for b in self.bounds if lo < b < hi]
        for a, b in zip([lo, *cuts], [*cuts, hi], strict=True):
            while a < b and self.text[a] in _WS:
                a += 1
            while b > a and self.text[b - 1] in _WS:
                b -= 1
            if a < b:
                self._pieces(a, b, out)

    def _pieces(self, lo: int, hi: int, out: list[_Unit]) -> None:
        """``[lo, hi)`` as units of at most ``max`` bytes (rule 1's cuts)."""
        text = self.text
        while hi - lo > self.max:
            cut = _cut(text, lo, lo + self.max)
            end = cut
            while end > lo and text[end - 1] in _WS:
                end -= 1
            out.append(_Unit(lo, end if end > lo else cut))
            lo = cut
            while lo < hi and text[lo] in _WS:
                lo += 1
        if hi > lo:
            out.append(_Unit(lo, hi))

    # -- tables ------------------------------------------------------------------------

    def _tables(self, level: list[_Span]) -> None:
        """Map each data row's start to its table's header range (rule 4)."""
        for i, s in enumerate(level):
            if self._has_label(s, "TABLE"):
                if s.children:  # docling: the table's span holds its rows
                    rows = s.children
                    n = 0
                    while n < len(rows) and not rows[n].nodes:
                        n += 1
                    if 0 < n < len(rows):
                        header = self._header(rows[0].start, rows[n - 1].end)
                        for r in rows[n:]:
                            self.row_header[r.start] = header
                else:  # csv, tsv, xlsx: the TABLE's span is the header line
                    header = self._header(s.start, s.end)
                    for r in level[i + 1 :]:
                        if r.kind != "cell":
                            break
                        self.row_header[r.start] = header
            self._tables(s.children)

    def _header(self, start: int, end: int) -> tuple[int, int]:
        if end < len(self.text) and self.text[end] == 0x0A:
            end += 1
        return start, end

    def _has_label(self, s: _Span, label: str) -> bool:
        for n in s.nodes:
            found = self.nodes.get(n)
            if found is not None and label in found.labels:
                return True
        return False

    # -- packing -----------------------------------------------------------------------

    def run(self) -> list[Chunk]:
        found: list[_Unit] = []
        self._units(self.roots, 0, len(self.text), found)
        units = self._merge(found)
        ranges: list[tuple[int, int, tuple[int, int] | None]] = []
        seg_start = 0
        i = 0
        prev_end: int | None = None
        while i < len(units):
            u = units[i]
            seg = bisect_right(self.bounds, u.start)
            seg_lo = self.bounds[seg - 1] if seg else 0
            seg_hi = self.bounds[seg] if seg < len(self.bounds) else len(self.text) + 1
            if seg_lo != seg_start:
                seg_start, prev_end = seg_lo, None
            header = self.row_header.get(u.start)
            cap = self.max
            if header is not None:
                hlen = header[1] - header[0]
                if hlen * 2 > self.max or u.end - u.start > self.max - hlen:
                    header = None
                else:
                    cap -= hlen
            start = u.start
            if prev_end is not None and self.overlap:
                reach = max(prev_end - self.overlap, seg_lo, ranges[-1][0] + 1)
                start = self._overlap_start(reach, u, cap, units)
            if header is not None and header[1] > start:
                header, cap = None, self.max
            end = u.end
            j = i + 1
            while j < len(units) and units[j].start < seg_hi and units[j].end - start <= cap:
                j += 1
            if j - 1 > i and units[j - 1].start in self.head_set:
                j -= 1  # a heading opens the next chunk rather than closing this one
            end = units[j - 1].end
            ranges.append((start, end, header))
            prev_end = end
            i = j
        return self._finish(ranges)

    def _merge(self, units: list[_Unit]) -> list[_Unit]:
        """Units of spans that overlap without nesting: joined while the join fits,
        else the later one starts where the earlier ends."""
        out: list[_Unit] = []
        for u in units:
            if out and u.start < out[-1].end:
                last = out[-1]
                if u.end <= last.end:
                    continue
                if u.end - last.start <= self.max:
                    out[-1] = _Unit(last.start, u.end)
                    continue
                u = _Unit(last.end, u.end)
            out.append(u)
        return out

    def _overlap_start(self, lo: int, u: _Unit, cap: int, units: list[_Unit]) -> int:
        """Where a chunk whose first new unit is ``u`` starts, reaching back to ``lo``."""
        lo = max(lo, u.end - cap)
        if lo >= u.start:
            return u.start
        text = self.text
        k = bisect_left(units, lo, key=lambda x: x.start)
        unit_start = units[k].start if k < len(units) else u.start
        pos = lo
        while pos < u.start:
            if pos == unit_start or (pos > 0 and text[pos - 1] in _WS and text[pos] not in _WS):
                return pos
            pos += 1
        return _grapheme_ceil(text, lo, u.start)

    def _finish(self, ranges: list[tuple[int, int, tuple[int, int] | None]]) -> list[Chunk]:
        starts = [r[0] for r in ranges]
        ends = [r[1] for r in ranges]
        hits: list[list[int]] = [[] for _ in ranges]
        for k, s in enumerate(self.spans):
            if s.opened:
                continue
            c = bisect_right(ends, s.start)
            while c < len(ranges) and starts[c] < s.end:
                hits[c].append(k)
                c += 1
        head_starts = [s.start for s in self.spans]
        chunks = []
        for index, (start, end, header) in enumerate(ranges):
            picked = hits[index]
            if header is not None:
                lo = bisect_left(head_starts, header[0])
                hi = bisect_left(head_starts, header[1])
                picked = [k for k in range(lo, hi) if not self.spans[k].opened] + picked
            ids: dict[bytes, None] = {}
            for k in picked:
                for n in self.spans[k].nodes:
                    ids[n] = None
            pages = [p for n in ids if (p := _page(self.nodes.get(n))) is not None]
            h = bisect_right(self.heads, start) - 1
            chunks.append(
                Chunk(
                    index=index,
                    start=start,
                    end=end,
                    header=header,
                    heading_path=self.paths[h] if h >= 0 else (),
                    pages=(min(pages), max(pages)) if pages else None,
                    node_ids=tuple(ids),
                )
            )
        return chunks


def _page(node: ChunkNode | None) -> int | None:
    return node.page if node is not None else None


def _nest(spans: list[_Span]) -> list[_Span]:
    """The spans (sorted by start, longest first) as a forest: each span is the child of the
    innermost earlier span that contains it; a span overlapping without being contained
    starts a sibling."""
    roots: list[_Span] = []
    stack: list[_Span] = []
    for s in spans:
        while stack and not (s.start >= stack[-1].start and s.end <= stack[-1].end):
            stack.pop()
        (stack[-1].children if stack else roots).append(s)
        stack.append(s)
    return roots


def _sections(
    spans: list[_Span], nodes: dict[bytes, ChunkNode]
) -> tuple[list[int], list[tuple[str, ...]], list[int]]:
    """The SECTION headings' starts in reading order, the titles above and at each (the
    heading path from that byte on), and the starts of the top-level ones."""
    starts: list[int] = []
    paths: list[tuple[str, ...]] = []
    top: list[int] = []
    stack: list[tuple[int, str]] = []
    for s in spans:
        for n in s.nodes:
            node = nodes.get(n)
            if node is None or "SECTION" not in node.labels:
                continue
            level = node.level if node.level is not None else 1
            while stack and stack[-1][0] >= level:
                stack.pop()
            if not stack:
                top.append(s.start)
            stack.append((level, node.title if node.title is not None else ""))
            starts.append(s.start)
            paths.append(tuple(t for _, t in stack))
            break
    return starts, paths, top


def _cut(text: bytes, lo: int, limit: int) -> int:
    """Where to cut a piece starting at ``lo`` that must end by ``limit``: after the last
    sentence end, else at the last whitespace, else at the last character boundary."""
    window = text[lo : limit + 1]
    best = -1
    for m in _SENTENCE_END.finditer(window):
        if m.end() <= limit - lo:
            best = m.end()
    if best > 0:
        return lo + best
    space = -1
    for m in _SPACE.finditer(window, 1):
        if m.start() <= limit - lo:
            space = m.start()
    if space > 0:
        return lo + space
    return _grapheme_floor(text, lo, limit)


#: Bytes before (and after) an offset decoded to find the grapheme clusters around it: a
#: cluster longer than this (dozens of stacked marks) may be cut at a character boundary.
_REACH = 256
_CLUSTER = regex.compile(r"\X")


def _simple(text: bytes, pos: int) -> bool:
    """Whether ``pos`` lies between two ASCII characters other than CR LF (then it is a
    cluster boundary without looking further)."""
    return text[pos] < 0x80 and text[pos - 1] < 0x80 and text[pos - 1 : pos + 1] != b"\r\n"


def _boundaries(text: bytes, lo: int, hi: int) -> list[int]:
    """The extended grapheme cluster boundaries (byte offsets) of ``text`` in ``[lo, hi]``,
    as the clusters of the text around them cut it."""
    a, b = max(0, lo - _REACH), min(len(text), hi + _REACH)
    while a > 0 and 0x80 <= text[a] < 0xC0:
        a -= 1
    while b < len(text) and 0x80 <= text[b] < 0xC0:
        b += 1
    out, off = [], a
    for m in _CLUSTER.finditer(text[a:b].decode("utf-8", "replace")):
        if lo <= off <= hi:
            out.append(off)
        off += len(m.group().encode())
    if lo <= off <= hi:
        out.append(off)
    return out


def _grapheme_floor(text: bytes, lo: int, pos: int) -> int:
    """The last grapheme cluster boundary in ``(lo, pos]``, else the last UTF-8 character
    boundary there (``pos`` when none is after ``lo``)."""
    if pos >= len(text) or _simple(text, pos):
        return pos
    found = [b for b in _boundaries(text, max(lo + 1, pos - _REACH), pos) if b > lo]
    if found:
        return found[-1]
    while pos > lo + 1 and 0x80 <= text[pos] < 0xC0:
        pos -= 1
    return pos


def _grapheme_ceil(text: bytes, pos: int, hi: int) -> int:
    """The first grapheme cluster boundary in ``[pos, hi]``, else the first UTF-8 character
    boundary there."""
    if pos <= 0 or pos >= len(text) or _simple(text, pos):
        return pos
    found = _boundaries(text, pos, min(hi, pos + _REACH))
    if found:
        return found[0]
    while pos < hi and 0x80 <= text[pos] < 0xC0:
        pos += 1
    return pos
