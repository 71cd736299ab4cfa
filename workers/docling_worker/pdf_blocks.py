"""Paragraphs, headings and list items of a native PDF: the second half of the model-free
layout pass (docs/formats.md, Documents: PDF), over the lines, running headers/footers and
column runs of :mod:`docling_worker.pdf_lines`.

1. **Paragraphs** (per column run): a line continues the block above it unless the gap
   between them is over 0.8 line heights, their type sizes (box heights) differ by over 20%,
   their weights differ, the line starts a list item, the line is indented past the line
   above while that one is not its block's first line (a first-line indent), or the line
   above is a last line (unless the block is a list item and the line hangs under its text,
   or both lines are centred in the run): short of the run's right edge by over a line
   height, with the next line indented (justified text) or the shortfall over 15% of the
   run's width (ragged-right text).
2. **Hyphenation**: a line ending in a letter and ``-`` followed by a line starting with a
   lower-case letter is joined without the hyphen (``Amer-`` + ``ican`` → ``American``); other
   lines are joined by one space. The canonical text holds the joined words.
3. **Headings**: a block of at most 3 lines and 200 characters, not a list item (but for a
   numbered one of a single line: ``(1) Scope`` in bold is a heading), whose line
   height is at least 1.15 times the body's (the median line height over all characters), or
   which is bold at about body size (at least 0.9 times) while the body is mostly not bold.
   Levels rank the heading styles (height to the half point, bold), tallest first, bold before
   regular at one height: level 1, 2, … (at most 6), as markdown's ``#``, ``##``, …. Headings
   of one style on lines right under each other, at one left edge, are one heading.
4. **List items**: a block starting with a bullet (``•`` and its kin, or ``-``/``*``/``–``
   followed by a space; symbol-font bullets are mapped by :mod:`docling_worker.pdf_fonts`) or
   a number (``1.``, ``2)``, ``a.``, ``(iv)``) is a list item; a bullet is not kept in the
   text, a number is. ``list_level`` ranks the marker's indentation within a run of items.
5. **Across column and page breaks**: a paragraph whose text does not end a sentence
   (``.``, ``!``, ``?``, ``:``, ``;``, closing quotes or brackets) continues with the next
   run's first block when that one is a paragraph of the same style starting with a lower-case
   letter: one block, with one box per part (``parts``).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from docling_core.types.doc import DoclingDocument

from docling_worker.pdf_lines import Line, columns, page_lines, running_lines
from docling_worker.pdf_lines import rtl_text as _rtl

__all__ = ["PdfBlock", "pdf_blocks"]

_PARA_GAP = 0.8
_HEIGHT_CHANGE = 0.2
_HEADING_RATIO = 1.15
_BOLD_HEADING_RATIO = 0.9
_HEADING_LINES = 3
_HEADING_CHARS = 200
_MAX_LEVEL = 6
_BULLET = re.compile(r"^[•·▪▫◦‣∙●○■□►▸➢✓❖◆◇]\s*|^[-*–]\s+")
_NUMBER = re.compile(r"^(?:\d{1,3}[.)]|[a-z][.)]|\((?:\d{1,3}|[a-z]|[ivxlc]{1,5})\))\s+")
_SENTENCE_END = tuple(".!?:;\"')]”’»")


@dataclass(slots=True)
class PdfBlock:
    """A paragraph, heading, list item, running header or footer.

    ``text``: the canonical text (lines joined, hyphenation undone, a bullet left out);
    ``page`` and top-left ``bbox`` ``[x0, y0, x1, y1]`` (points) of its first part; ``parts``:
    ``(page, bbox)`` per page/column part, in reading order (one for most blocks); ``kind``:
    ``paragraph``, ``heading``, ``list_item``, ``page_header`` or ``page_footer``; ``level``:
    the heading level (1 = top; 0 otherwise); ``list_level``: 1 for a top-level list item."""

    text: str
    page: int
    bbox: list[float]
    kind: str = "paragraph"
    level: int = 0
    list_level: int = 0
    parts: list[tuple[int, list[float]]] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)


def _box(lines: list[Line]) -> list[float]:
    return [
        round(v, 2)
        for v in (min(ln.x0 for ln in lines), min(ln.y0 for ln in lines),
                  max(ln.x1 for ln in lines), max(ln.y1 for ln in lines))
    ]  # fmt: skip


def _is_item(text: str) -> bool:
    return bool(_BULLET.match(text) or _NUMBER.match(text))


def _ends_paragraph(prev: Line, line: Line, left: float, right: float) -> bool:
    short = right - prev.x1
    if short <= prev.height:
        return False
    return line.x0 - left >= 0.5 * prev.height or short > 0.15 * (right - left)


def _centered(line: Line, left: float, right: float) -> bool:
    """Whether ``line`` is centred in its run (off its left edge, middle within a line
    height of the run's middle)."""
    middle = (line.x0 + line.x1) / 2
    return line.x0 > left + line.height and abs(middle - (left + right) / 2) <= line.height


def _hangs(group: list[Line], line: Line) -> bool:
    """Whether ``line`` continues a list item with a hanging indent: the item's first line
    starts with a marker and ``line`` starts right of that marker."""
    first = group[0]
    return _is_item(first.text) and line.x0 > first.x0 + 0.5 * first.height


def _mirrored(line: Line) -> Line:
    return Line(line.page, -line.x1, line.y0, -line.x0, line.y1, line.text, line.bold, line.size)


def _paragraphs(run: list[Line]) -> list[list[Line]]:
    """``run``'s lines grouped into blocks (module docstring, step 1). A run of mostly
    right-to-left text is judged mirrored: its lines start at the right edge."""
    rtl = _rtl(" ".join(ln.text for ln in run))
    view = [_mirrored(ln) for ln in run] if rtl else run
    left = min(ln.x0 for ln in view)
    right = max(ln.x1 for ln in view)
    groups: list[list[Line]] = []
    seen: list[list[Line]] = []  # the same groups, as judged (mirrored or not)
    for original, line in zip(run, view, strict=True):
        group = seen[-1] if seen else None
        prev = group[-1] if group else None
        if (
            group is None
            or prev is None
            or line.y0 - prev.y1 > _PARA_GAP * prev.height
            or (
                abs(line.size - prev.size) > _HEIGHT_CHANGE * prev.size
                and not (len(group) == 1 and _hangs(group, line))  # a bullet's glyph box
            )
            or line.bold != prev.bold
            or _is_item(line.text)
            or (len(group) > 1 and line.x0 > prev.x0 + 0.5 * prev.height)
            or (
                not _hangs(group, line)
                and not (_centered(prev, left, right) and _centered(line, left, right))
                and _ends_paragraph(prev, line, left, right)
            )
        ):
            seen.append([line])
            groups.append([original])
        else:
            group.append(line)
            groups[-1].append(original)
    return groups


def _join(lines: list[str]) -> str:
    out = ""
    for text in lines:
        if len(out) > 1 and out[-1] == "-" and out[-2].isalpha() and text[:1].islower():
            out = out[:-1] + text
        elif out:
            out += " " + text
        else:
            out = text
    return out


def _block(group: list[Line]) -> PdfBlock:
    text = _join([ln.text for ln in group])
    kind = "paragraph"
    if _is_item(text):
        kind = "list_item"
        bullet = _BULLET.match(text)
        if bullet:
            text = text[bullet.end() :]
    box = _box(group)
    return PdfBlock(text, group[0].page, box, kind, parts=[(group[0].page, box)], lines=group)


def _style(block: PdfBlock) -> tuple[float, bool]:
    return round(block.lines[0].size * 2) / 2, block.lines[0].bold


def _headings(blocks: list[PdfBlock]) -> None:
    weighted = [(ln.size, len(ln.text), ln.bold) for b in blocks for ln in b.lines]
    if not weighted:
        return
    chars = sorted(weighted)
    total = sum(n for _h, n, _b in chars)
    seen = 0
    body = chars[-1][0]
    for height, n, _bold in chars:  # the character-weighted median line height
        seen += n
        if seen * 2 >= total:
            body = height
            break
    bold_body = sum(n for _h, n, bold in weighted if bold) * 2 > total
    found = []
    for b in blocks:
        numbered_line = b.kind == "list_item" and len(b.lines) == 1 and _NUMBER.match(b.text)
        if b.kind != "paragraph" and not numbered_line:
            continue
        if len(b.lines) > _HEADING_LINES or len(b.text) > _HEADING_CHARS:
            continue
        height = statistics.median(ln.size for ln in b.lines)
        bold = all(ln.bold for ln in b.lines)
        if (
            height >= _HEADING_RATIO * body
            or (bold and not bold_body and height >= _BOLD_HEADING_RATIO * body)
        ) and any(ch.isalpha() for ch in b.text):
            found.append(b)
    styles = sorted({_style(b) for b in found}, key=lambda s: (-s[0], not s[1]))
    for b in found:
        b.kind = "heading"
        b.level = min(styles.index(_style(b)) + 1, _MAX_LEVEL)


def _heading_lines(blocks: list[PdfBlock]) -> list[PdfBlock]:
    """Consecutive one-style headings on lines right under each other (a gap of at most
    0.8 type sizes, the same left edge) are one heading broken over lines, unless the lower
    one starts with a number (``(2) …``: a heading of its own)."""
    out: list[PdfBlock] = []
    for b in blocks:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.kind == b.kind == "heading"
            and not _is_item(b.text)
            and _style(prev) == _style(b)
            and prev.page == b.page
            and 0 <= b.lines[0].y0 - prev.lines[-1].y1 <= _PARA_GAP * b.lines[0].size
            and abs(b.lines[0].x0 - prev.lines[0].x0) <= b.lines[0].size
        ):
            prev.lines = prev.lines + b.lines
            prev.text = _join([prev.text, b.text])
            prev.bbox = _box(prev.lines)
            prev.parts = [(prev.page, prev.bbox)]
            continue
        out.append(b)
    return out


def _list_levels(blocks: list[PdfBlock]) -> None:
    indents: list[float] = []
    for b in blocks:
        if b.kind != "list_item":
            indents = []
            continue
        x0 = b.lines[0].x0
        while indents and x0 < indents[-1] - 2:
            indents.pop()
        if not indents or x0 > indents[-1] + 2:
            indents.append(x0)
        b.list_level = len(indents)


def _continues(prev: PdfBlock, nxt: PdfBlock) -> bool:
    return (
        prev.kind == "paragraph"
        and nxt.kind == "paragraph"
        and not prev.text.endswith(_SENTENCE_END)
        and nxt.text[:1].islower()
        and _style(prev) == _style(nxt)
    )


def pdf_blocks(doc: DoclingDocument) -> list[PdfBlock]:
    """The document's blocks (module docstring): body blocks in reading order, then the
    running headers and footers (``page_header``/``page_footer``) in page order."""
    pages = page_lines(doc)
    headers, footers = running_lines(pages)
    blocks: list[PdfBlock] = []
    breaks: set[int] = set()  # ids of the blocks that start a column run
    for _no, lines in pages.items():
        for run in columns(lines):
            run_blocks = [_block(group) for group in _paragraphs(run)]
            breaks.add(id(run_blocks[0]))
            blocks.extend(run_blocks)
    _headings(blocks)
    blocks = _heading_lines(blocks)
    _list_levels(blocks)
    merged: list[PdfBlock] = []
    for b in blocks:
        if id(b) in breaks and merged and _continues(merged[-1], b):
            prev = merged[-1]
            prev.text = _join([prev.text, b.text])
            prev.parts.extend(b.parts)
            prev.lines = prev.lines + b.lines
            continue
        merged.append(b)
    running = [("page_header", ln) for ln in headers] + [("page_footer", ln) for ln in footers]
    for kind, ln in sorted(running, key=lambda r: (r[1].page, r[0] != "page_header", r[1].y0)):
        box = _box([ln])
        merged.append(PdfBlock(ln.text, ln.page, box, kind, parts=[(ln.page, box)]))
    return merged
