"""The second PDF extractor: pypdfium2's text layer, when docling's (docling-parse) cannot
read a document — it refuses it, crashes on it (a Form XObject drawing itself through its own
resources took docling-parse's stack) or hangs until ``docling.timeout_s``.

Each page's text (pdfium's reading of its content stream, recursion bounded by pdfium) is cut
into paragraphs at blank lines, else one paragraph per page, each placed on its page with the
page's box (no line geometry: pdfium's text is not grouped into headings). The result is a
:class:`DoclingDocument` the layout path of :mod:`docling_worker.projection` projects; the job's
``stats.pdf_extractor`` says ``pypdfium2`` (``docling-parse`` otherwise).
"""

from __future__ import annotations

import re
from pathlib import Path

from docling_core.types.doc import (
    BoundingBox,
    CoordOrigin,
    DocItemLabel,
    DoclingDocument,
    ProvenanceItem,
    Size,
)

from workers_common import CorruptInput, ResourceLimit, UnsupportedFeature

__all__ = ["pdf_text_document"]

_BLANK = re.compile(r"\n\s*\n")


def pdf_text_document(path: Path, max_pages: int) -> DoclingDocument:
    """The PDF at ``path`` read by pypdfium2 (module docstring).

    :raises CorruptInput: pdfium cannot open it either.
    :raises ResourceLimit: more than ``max_pages`` pages.
    :raises UnsupportedFeature: no page has a text layer (``ocr_required``).
    """
    import pypdfium2

    try:
        pdf = pypdfium2.PdfDocument(str(path))
    except pypdfium2.PdfiumError as exc:
        raise CorruptInput(f"no PDF extractor can read this pdf: {exc}") from None
    try:
        if len(pdf) > max_pages:
            raise ResourceLimit(f"{len(pdf)} pages is over docling.max_pages ({max_pages})")
        doc = DoclingDocument(name=path.stem)
        found = False
        for index in range(len(pdf)):
            page = pdf[index]
            width, height = page.get_size()
            doc.add_page(page_no=index + 1, size=Size(width=width, height=height))
            text = page.get_textpage().get_text_range().replace("\r\n", "\n").replace("\r", "\n")
            box = BoundingBox(l=0, t=0, r=width, b=height, coord_origin=CoordOrigin.TOPLEFT)
            for para in _BLANK.split(text):
                para = para.strip()
                if not para:
                    continue
                found = True
                prov = ProvenanceItem(page_no=index + 1, bbox=box, charspan=(0, len(para)))
                doc.add_text(label=DocItemLabel.TEXT, text=para, prov=prov)
        if len(pdf) and not found:
            raise UnsupportedFeature(
                f"ocr_required: {len(pdf)} page(s) without a text layer (scanned images)"
            )
        return doc
    finally:
        pdf.close()
