"""Font facts of a native PDF's text lines, kept on docling's text items for the layout pass
(:mod:`docling_worker.pdf_blocks`).

docling's ``NativePdfPipeline`` adds one text item per docling-parse text line, in the order
of each page's line cells, but keeps neither the line's font nor its weight. This module walks
the same cells in the same order and writes back, per item:

- **weight**: ``formatting.bold`` when the line's font name says a bold face (``Bold``,
  ``Black``, ``Heavy``, ``Demi``, ``Semibold``: PDF font names carry the weight; docling-parse
  gives the font of the line's first character);
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
_BOLD = re.compile(r"bold|black|heavy|demi|medi\b|(?:cm|sf|lm|ec|tc)bx", re.IGNORECASE)
_SYMBOL = re.compile(r"symbol|wingding|dingbat|webding", re.IGNORECASE)


def mark_fonts(doc: DoclingDocument, pages: list[Any]) -> None:
    """Write the weight and bullet facts (module docstring) onto ``doc``'s text items from
    ``pages`` (docling's ``ConversionResult.pages``: ``parsed_page.textline_cells`` per page,
    in the order the pipeline added the items). A page without parsed cells is skipped; items
    and cells are matched per page in order, and a page whose counts differ is left alone."""
    by_page: dict[int, list[TextItem]] = {}
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
        for cell, item in zip(cells, items, strict=True):
            font = cell.font_name or ""
            if _BOLD.search(font):
                item.formatting = Formatting(bold=True)
            text = item.text
            alone = len(text) == 1 or text[1:2].isspace()
            if _SYMBOL.search(font) and alone and not text[0].isalnum():
                item.text = BULLET + text[1:]
