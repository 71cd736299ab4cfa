"""Font facts of a native PDF's text lines, kept on docling's text items for the layout pass
(:mod:`docling_worker.pdf_blocks`).

docling's ``NativePdfPipeline`` adds one text item per docling-parse text line, in the order
of each page's line cells, but keeps neither the line's font nor its weight. This module walks
the same cells in the same order and writes back, per item:

- **weight**: ``formatting.bold`` when the line's font is heavier than the body's: PDF font
  names carry the weight (``Thin``/``Light`` 300, ``Regular`` 400, ``Medium`` 500,
  ``Semibold``/``Demi`` 600, ``Bold``, TeX's ``bx``, Nimbus's ``Medi`` 700, ``Black``/``Heavy``
  900; docling-parse gives the font of the line's first character). A line is bold at 600 or
  more, or 200 over the body's weight (the weight of most characters: a ``Medium`` heading
  over ``Light`` body text);
- **bullets**: a line whose first character is drawn in a symbol font (Symbol, Wingdings,
  ZapfDingbats) and stands alone before the text is a list bullet. docling-parse decodes such
  glyphs through the font's built-in encoding table, which gives unrelated characters (Word's
  Symbol bullet comes out as ``∞``): the glyph is written as ``•`` (U+2022), as pdfium's
  ToUnicode reading gives it. Only a line's first glyph, alone or followed by a space, is mapped; a
  symbol glyph elsewhere (a formula's ``∞``) keeps docling-parse's reading.

docs/formats.md (Documents: PDF) describes the layout pass these facts feed.
"""

from __future__ import annotations

import re
from typing import Any

from docling_core.types.doc import DoclingDocument, Formatting, TextItem

__all__ = ["BULLET", "mark_fonts"]

#: The character a symbol-font bullet glyph becomes in the canonical text.
BULLET = "•"
_WEIGHTS = (
    (re.compile(r"black|heavy|ultrabold|extrabold", re.IGNORECASE), 900),
    (re.compile(r"semibold|demi", re.IGNORECASE), 600),
    (re.compile(r"bold|medi\b|(?:cm|sf|lm|ec|tc)bx", re.IGNORECASE), 700),
    (re.compile(r"medium", re.IGNORECASE), 500),
    (re.compile(r"thin|light|hairline", re.IGNORECASE), 300),
)
_BOLD = 600
_HEAVIER = 200
_SYMBOL = re.compile(r"symbol|wingding|dingbat|webding", re.IGNORECASE)


def _weight(font: str) -> int:
    """The weight class (CSS scale, 100-900) a PDF font name says; 400 when it says none."""
    for pattern, weight in _WEIGHTS:
        if pattern.search(font):
            return weight
    return 400


def _body_weight(weights: list[tuple[int, int]]) -> int:
    """The weight of most characters (``(weight, characters)`` per line); 400 for none."""
    totals: dict[int, int] = {}
    for weight, n in weights:
        totals[weight] = totals.get(weight, 0) + n
    return max(sorted(totals), key=lambda w: totals[w]) if totals else 400


def mark_fonts(doc: DoclingDocument, pages: list[Any]) -> None:
    """Write the weight and bullet facts (module docstring) onto ``doc``'s text items from
    ``pages`` (docling's ``ConversionResult.pages``: ``parsed_page.textline_cells`` per page,
    in the order the pipeline added the items). A page without parsed cells is skipped; items
    and cells are matched per page in order, and a page whose counts differ is left alone."""
    by_page: dict[int, list[TextItem]] = {}
    pairs: list[tuple[Any, TextItem]] = []
    for item in doc.texts:
        if item.prov:
            by_page.setdefault(item.prov[0].page_no, []).append(item)
    for page in pages:
        parsed = getattr(page, "parsed_page", None)
        if parsed is None:
            continue
        cells = [c for c in parsed.textline_cells if c.text]
        items = by_page.get(page.page_no, [])
        if len(cells) != len(items):
            continue
        pairs.extend(zip(cells, items, strict=True))
    weights = [(_weight(cell.font_name or ""), len(item.text)) for cell, item in pairs]
    body = _body_weight(weights)
    for (cell, item), (weight, _n) in zip(pairs, weights, strict=True):
        font = cell.font_name or ""
        if weight >= _BOLD or weight >= body + _HEAVIER:
            item.formatting = Formatting(bold=True)
        text = item.text
        alone = len(text) == 1 or text[1:2].isspace()
        if _SYMBOL.search(font) and alone and not text[0].isalnum():
            item.text = BULLET + text[1:]
