"""Lines, running headers and footers, and columns of a native PDF's pages: the first half
of the model-free layout pass (docs/formats.md, Documents: PDF; the second half, paragraphs,
headings and lists, is :mod:`docling_worker.pdf_blocks`).

1. **Lines**: docling's text items (one per docling-parse text line, with its box and, from
   :mod:`docling_worker.pdf_fonts`, its weight) on the same baseline (tops within 0.3 line
   heights) and adjacent (a gap of at most one line height: not across a column gutter;
   three after a section number such as ``1``, ``2.3``, ``IV.``) are one line, read left to
   right, or right to left when most of its letters are Hebrew or Arabic (:func:`rtl_text`).
2. **Running headers and footers**: on a document of two pages or more, the lines of a
   page's two top-most (bottom-most) baselines whose text, digits aside, recurs at the top
   (bottom) of another page, and page numbers there (``12``, ``Page 3``, ``3 of 9``,
   ``- 4 -``), are PAGE_HEADER (PAGE_FOOTER) lines, out of the body text
   (:func:`running_lines`).
3. **Columns**: gutters are vertical strips of the page's text area that no narrow line
   (under 55% of the text area's width) crosses, at least 0.8 median line heights wide, not in
   the outer 15% of the area, with at least 2 lines on each side. A gutter crossed by more
   than 20% of the page's lines is no gutter (single-column text, tables). Lines crossing a
   gutter (titles, wide captions) cut the page into bands; reading order is band by band,
   top to bottom, and in a band column by column, left to right, each top to bottom.

Coordinates are PDF points with a **top-left** origin (docling's boxes are bottom-left).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from docling_core.types.doc import CoordOrigin, DoclingDocument

__all__ = ["Line", "columns", "page_lines", "rtl_text", "running_lines"]

_SAME_BASELINE = 0.3
_ADJACENT = 1.0  # most horizontal gap (line heights) between parts of one line
_NUMBER_GAP = 3.0
_SECTION_NUMBER = re.compile(r"^(?:\d{1,2}(?:\.\d{1,2})*\.?|[IVX]{1,4}\.?)$")
_NARROW = 0.55
_GUTTER = 0.8
_EDGE = 0.15
_CROSSING_SHARE = 0.2
_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(
    r"^(?:page\s*)?[-–—]?\s*\d{1,4}\s*[-–—]?(?:\s*(?:of|/)\s*\d{1,4})?$", re.IGNORECASE
)


@dataclass(slots=True)
class Line:
    """One visual line: ``page`` (1-based), top-left box in points, ``text`` (whitespace
    runs as single spaces), ``bold`` (the font of its longest part says a bold face)."""

    page: int
    x0: float
    y0: float  # top
    x1: float
    y1: float  # bottom
    text: str
    bold: bool = False
    #: The type size (points): the box height of the line's longest part (a bullet's
    #: taller glyph box does not make its line taller type).
    size: float = 0.0

    @property
    def height(self) -> float:
        return max(self.y1 - self.y0, 0.1)


def _items(doc: DoclingDocument) -> dict[int, list[Line]]:
    pages: dict[int, list[Line]] = {}
    for item in doc.texts:
        if not item.prov or not item.text.strip():
            continue
        prov = item.prov[0]
        box = prov.bbox
        if box.coord_origin is not CoordOrigin.TOPLEFT and prov.page_no in doc.pages:
            box = box.to_top_left_origin(page_height=doc.pages[prov.page_no].size.height)
        formatting = getattr(item, "formatting", None)  # docling_worker.pdf_fonts
        bold = bool(formatting is not None and formatting.bold)
        pages.setdefault(prov.page_no, []).append(
            Line(
                prov.page_no,
                box.l,
                box.t,
                box.r,
                box.b,
                " ".join(item.text.split()),
                bold,
                max(box.b - box.t, 0.1),
            )
        )
    return pages


def _reach(part: Line) -> float:
    """The widest gap (line heights) after ``part`` to the next part of its line: wider
    after a heading's number (``1``, ``2.3``, ``IV``), set apart by a tab stop."""
    return _NUMBER_GAP if _SECTION_NUMBER.match(part.text) else _ADJACENT


def rtl_text(text: str) -> bool:
    """Whether most of ``text``'s letters are of a right-to-left script (Hebrew, Arabic)."""
    letters = [ch for ch in text if ch.isalpha()]
    rtl = sum(1 for ch in letters if "\u0590" <= ch <= "\u08ff" or "\ufb1d" <= ch <= "\ufeff")
    return rtl * 2 > len(letters)


def _line(parts: list[Line]) -> Line:
    """One line of ``parts`` (left to right): their box, their text in reading order (right
    to left when most letters are of a right-to-left script), the longest part's weight and
    size."""
    longest = max(parts, key=lambda p: len(p.text))
    ordered = parts[::-1] if len(parts) > 1 and rtl_text("".join(p.text for p in parts)) else parts
    return Line(
        parts[0].page, min(p.x0 for p in parts), min(p.y0 for p in parts),
        max(p.x1 for p in parts), max(p.y1 for p in parts),
        " ".join(p.text for p in ordered), longest.bold, longest.size,
    )  # fmt: skip


def _merge_baselines(items: list[Line]) -> list[Line]:
    items = sorted(items, key=lambda i: (round(i.y0, 1), i.x0))
    groups: list[list[Line]] = []
    for item in items:
        group = groups[-1] if groups else None
        if (
            group is not None
            and abs(item.y0 - group[0].y0) <= _SAME_BASELINE * group[0].height
            and group[0].x0 <= item.x0 <= group[-1].x1 + _reach(group[-1]) * group[0].height
        ):
            group.append(item)
        else:
            groups.append([item])
    return [_line(group) for group in groups]


def page_lines(doc: DoclingDocument) -> dict[int, list[Line]]:
    """Each page's lines (step 1), top to bottom, by page number."""
    return {no: _merge_baselines(items) for no, items in sorted(_items(doc).items())}


def _baselines(lines: list[Line], from_top: bool) -> list[list[Line]]:
    """The lines of the two outermost baselines, from the top or from the bottom."""
    ordered = sorted(lines, key=lambda ln: ln.y0 if from_top else -ln.y1)
    groups: list[list[Line]] = []
    for ln in ordered:
        if groups and abs(ln.y0 - groups[-1][0].y0) <= _SAME_BASELINE * groups[-1][0].height:
            groups[-1].append(ln)
        elif len(groups) < 2:
            groups.append([ln])
        else:
            break
    return groups


def _key(ln: Line) -> str:
    return _DIGITS.sub("#", ln.text.lower())


def _running(ln: Line, found: dict[str, set[int]]) -> bool:
    """A page number, or a text with letters found on more than one page's edge."""
    key = _key(ln)
    return bool(_PAGE_NUMBER.match(ln.text)) or (
        len(found[key]) > 1 and any(ch.isalpha() for ch in key)
    )


def running_lines(pages: dict[int, list[Line]]) -> tuple[list[Line], list[Line]]:
    """The running header and footer lines (step 2), removed from ``pages`` (a mapping of
    page number → lines, changed in place); returns ``(headers, footers)`` in page order.

    A line of the two outermost baselines at the top (bottom) of a page is running when its
    text, digits aside and holding letters, is at the top (bottom) of another page too, or
    is a page number; on
    the outermost baseline, one running line makes the whole baseline running (a header's
    title and its page reference set apart on one baseline)."""
    if len(pages) < 2:
        return [], []
    edges = {
        no: (_baselines(lines, True), _baselines(lines, False))
        for no, lines in pages.items()
        if len(lines) > 2
    }
    seen: tuple[dict[str, set[int]], dict[str, set[int]]] = ({}, {})
    for no, sides in edges.items():
        for groups, found in zip(sides, seen, strict=True):
            for ln in (ln for group in groups for ln in group):
                found.setdefault(_key(ln), set()).add(no)
    headers: list[Line] = []
    footers: list[Line] = []
    for no, sides in sorted(edges.items()):
        for groups, found, out in zip(sides, seen, (headers, footers), strict=True):
            for depth, group in enumerate(groups):
                hits = [ln for ln in group if _running(ln, found)]
                if hits and depth == 0:
                    out.extend(sorted(group, key=lambda ln: ln.x0))
                elif hits:
                    out.extend(hits)
                else:
                    break  # the second baseline is looked at only under a running first one
        taken = {id(ln) for ln in headers + footers}
        pages[no] = [ln for ln in pages[no] if id(ln) not in taken]
    return headers, footers


def _gutters(lines: list[Line]) -> list[tuple[float, float]]:
    left = min(ln.x0 for ln in lines)
    right = max(ln.x1 for ln in lines)
    span = right - left
    min_gap = _GUTTER * statistics.median(ln.height for ln in lines)
    spans = sorted((ln.x0, ln.x1) for ln in lines if ln.x1 - ln.x0 < _NARROW * span)
    gutters: list[tuple[float, float]] = []
    reach = left
    for x0, x1 in spans:
        if x0 - reach >= min_gap:
            middle = (x0 + reach) / 2
            if left + _EDGE * span < middle < right - _EDGE * span:
                gutters.append((reach, x0))
        reach = max(reach, x1)
    kept = []
    for g0, g1 in gutters:
        crossing = sum(1 for ln in lines if ln.x0 < g0 and ln.x1 > g1)
        left_side = sum(1 for ln in lines if ln.x1 <= g0)
        right_side = sum(1 for ln in lines if ln.x0 >= g1)
        if crossing <= _CROSSING_SHARE * len(lines) and min(left_side, right_side) >= 2:
            kept.append((g0, g1))
    return kept


def columns(lines: list[Line]) -> list[list[Line]]:
    """One page's lines in reading order (step 3), as runs to read top to bottom: each
    column of each band, and each run of lines crossing a gutter, in order."""
    lines = sorted(lines, key=lambda ln: (ln.y0, ln.x0))
    if len(lines) < 4:
        return [lines] if lines else []
    gutters = _gutters(lines)
    if not gutters:
        return [lines]
    bounds = [g0 for g0, _g1 in gutters]
    runs: list[list[Line]] = []
    band: list[list[Line]] = [[] for _ in range(len(gutters) + 1)]
    spanning: list[Line] = []
    for ln in lines:
        if any(ln.x0 < g0 and ln.x1 > g1 for g0, g1 in gutters):
            runs.extend(col for col in band if col)
            band = [[] for _ in range(len(gutters) + 1)]
            spanning.append(ln)
            continue
        if spanning:
            runs.append(spanning)
            spanning = []
        middle = (ln.x0 + ln.x1) / 2
        band[sum(1 for b in bounds if middle > b)].append(ln)
    runs.extend(col for col in band if col)
    if spanning:
        runs.append(spanning)
    return runs
