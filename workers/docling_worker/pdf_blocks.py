"""Model-free block building for PDFs parsed by docling's ``NativePdfPipeline``,
which gives one text item per line with its page and box but no paragraphs,
headings or reading order.

Per page, in this order:

1. **Lines**: items on the same baseline (tops within 0.3 line heights) and adjacent (a gap
   of at most 2 line heights: not across a column gutter) are one line, left to right.
2. **Columns**: when some lines lie wholly left of the page's middle band and others wholly
   right of it, and at most 10% cross it, the page has two columns; crossing lines (titles)
   read with the left column. Reading order: left column top to bottom, then the right one.
3. **Paragraphs**: a line continues the paragraph above it unless the gap between them is
   over 0.8 line heights, their heights differ by over 20%, or the line above is a last line:
   short of the column's right edge by over a line height, with the next line indented
   (justified text) or the shortfall over 15% of the column width (ragged-right text).
4. **Headings**: a one-line block whose line height is at least 1.15 times the document's
   median (body) line height is a heading; levels rank the distinct heading heights, largest
   first (level 1).

Coordinates are PDF points with a **top-left** origin (docling's boxes are bottom-left).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from docling_core.types.doc import CoordOrigin, DoclingDocument

__all__ = ["PdfBlock", "pdf_blocks"]

_SAME_BASELINE = 0.3
_ADJACENT = 2.0  # most horizontal gap (line heights) between parts of one line
_PARA_GAP = 0.8
_HEIGHT_CHANGE = 0.2
_HEADING_RATIO = 1.15
_CROSSING_SHARE = 0.1


@dataclass(slots=True)
class _Line:
    page: int
    x0: float
    y0: float  # top (top-left origin)
    x1: float
    y1: float  # bottom
    text: str

    @property
    def height(self) -> float:
        return max(self.y1 - self.y0, 0.1)


@dataclass(slots=True)
class PdfBlock:
    """A paragraph or heading: its text (lines joined by a space), page, top-left ``bbox``
    ``[x0, y0, x1, y1]`` in points, and ``level`` (0: paragraph; 1, 2, …: heading)."""

    text: str
    page: int
    bbox: list[float]
    level: int = 0
    heights: list[float] = field(default_factory=list)


def _items(doc: DoclingDocument) -> dict[int, list[_Line]]:
    pages: dict[int, list[_Line]] = {}
    for item in doc.texts:
        if not item.prov or not item.text.strip():
            continue
        prov = item.prov[0]
        box = prov.bbox
        if box.coord_origin is not CoordOrigin.TOPLEFT and prov.page_no in doc.pages:
            box = box.to_top_left_origin(page_height=doc.pages[prov.page_no].size.height)
        pages.setdefault(prov.page_no, []).append(
            _Line(prov.page_no, box.l, box.t, box.r, box.b, " ".join(item.text.split()))
        )
    return pages


def _merge_baselines(items: list[_Line]) -> list[_Line]:
    items = sorted(items, key=lambda i: (round(i.y0, 1), i.x0))
    lines: list[_Line] = []
    for item in items:
        last = lines[-1] if lines else None
        if (
            last is not None
            and abs(item.y0 - last.y0) <= _SAME_BASELINE * last.height
            and last.x0 <= item.x0 <= last.x1 + _ADJACENT * last.height
        ):
            lines[-1] = _Line(
                last.page, last.x0, min(last.y0, item.y0), max(last.x1, item.x1),
                max(last.y1, item.y1), f"{last.text} {item.text}",
            )  # fmt: skip
        else:
            lines.append(item)
    return lines


def _columns(lines: list[_Line], width: float) -> list[list[_Line]]:
    left_edge, right_edge = width * 0.45, width * 0.55
    left = [ln for ln in lines if ln.x1 <= right_edge]
    right = [ln for ln in lines if ln.x0 >= left_edge and ln.x1 > right_edge]
    crossing = [ln for ln in lines if ln not in left and ln not in right]
    if not left or not right or len(crossing) > _CROSSING_SHARE * len(lines):
        return [sorted(lines, key=lambda ln: (ln.y0, ln.x0))]
    return [
        sorted(left + crossing, key=lambda ln: (ln.y0, ln.x0)),
        sorted(right, key=lambda ln: (ln.y0, ln.x0)),
    ]


def _ends_paragraph(prev: _Line, line: _Line, left: float, right: float) -> bool:
    """Whether ``prev`` is a paragraph's last line: it ends short of the column's right edge
    (by more than a line height) and either the next line is indented (justified text) or
    the shortfall is over 15% of the column (ragged-right text)."""
    short = right - prev.x1
    if short <= prev.height:
        return False
    return line.x0 - left >= 0.5 * prev.height or short > 0.15 * (right - left)


def _paragraphs(column: list[_Line]) -> list[list[_Line]]:
    left = min(ln.x0 for ln in column)
    right = max(ln.x1 for ln in column)
    groups: list[list[_Line]] = []
    for line in column:
        prev = groups[-1][-1] if groups else None
        if prev is not None and not (
            line.y0 - prev.y1 > _PARA_GAP * prev.height
            or abs(line.height - prev.height) > _HEIGHT_CHANGE * prev.height
            or _ends_paragraph(prev, line, left, right)
        ):
            groups[-1].append(line)
        else:
            groups.append([line])
    return groups


def pdf_blocks(doc: DoclingDocument) -> list[PdfBlock]:
    """The document's paragraphs and headings in reading order (module docstring)."""
    blocks: list[PdfBlock] = []
    for page_no, items in sorted(_items(doc).items()):
        page = doc.pages.get(page_no)
        width = page.size.width if page is not None else max(i.x1 for i in items)
        for column in _columns(_merge_baselines(items), width):
            for group in _paragraphs(column):
                blocks.append(
                    PdfBlock(
                        " ".join(ln.text for ln in group),
                        page_no,
                        [round(v, 2) for v in (min(ln.x0 for ln in group),
                         min(ln.y0 for ln in group), max(ln.x1 for ln in group),
                         max(ln.y1 for ln in group))],
                        heights=[ln.height for ln in group],
                    )
                )  # fmt: skip
    all_heights = [h for b in blocks for h in b.heights]
    if not all_heights:
        return blocks
    body = statistics.median(all_heights)
    heading_heights = sorted(
        {round(b.heights[0] * 2) / 2 for b in blocks
         if len(b.heights) == 1 and b.heights[0] >= _HEADING_RATIO * body},
        reverse=True,
    )  # fmt: skip
    for b in blocks:
        if len(b.heights) == 1 and b.heights[0] >= _HEADING_RATIO * body:
            b.level = heading_heights.index(round(b.heights[0] * 2) / 2) + 1
    return blocks
