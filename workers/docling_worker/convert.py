"""docling conversion: one converter per process, input checks, failures typed.

PDF runs docling's layout-model pipeline (``StandardPdfPipeline``: headings, tables, reading
order; OCR off) when ``TELHA_DOCLING__ARTIFACTS_PATH`` (``[docling] artifacts_path``) names a
folder of downloaded docling models, else the model-free ``NativePdfPipeline`` (one text item
per line, with page and box, laid out by :mod:`docling_worker.pdf_blocks`; the lines' font
weights and symbol-font bullets are written onto the items by :mod:`docling_worker.pdf_fonts`,
from the pipeline's parsed pages). DOCX, PPTX and HTML use docling's own backends, fully
offline; HTML is first re-serialized from the tree an HTML5 parser builds
(:mod:`docling_worker.html5`) (``HF_HUB_OFFLINE`` is set before
docling is imported); a DOCX whose headings docling's style rule misses (a paragraph's own
``w:outlineLvl``, a localized heading style) is first rewritten by
:mod:`docling_worker.docx_headings`.

Failure mapping: an OLE/CFB container given as DOCX/PPTX (how Office stores a
password-protected file) and a PDF that needs a password → ``unsupported_feature``
(``encrypted: …``); a PDF whose pages hold no text layer → ``unsupported_feature``
(``ocr_required: …``); anything docling cannot load → ``corrupt_input``; more than
``max_pages`` pages → ``resource_limit``.
"""

from __future__ import annotations

import os
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from docling.datamodel.base_models import ConversionStatus, InputFormat
from docling.datamodel.pipeline_options import NativePdfPipelineOptions, PdfPipelineOptions
from docling.document_converter import DocumentConverter, PdfFormatOption
from docling.pipeline.native_pdf_pipeline import NativePdfPipeline
from docling.pipeline.standard_pdf_pipeline import StandardPdfPipeline
from docling_core.types.doc import DoclingDocument

from docling_worker.docx_headings import expose_headings
from docling_worker.html5 import html5_bytes
from docling_worker.pdf_fonts import mark_fonts
from workers_common import CorruptInput, ResourceLimit, UnsupportedFeature

__all__ = ["MAX_PAGES", "convert", "pdf_pipeline"]

#: Most pages a document may have (``docling.max_pages``).
MAX_PAGES = 2000

_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_OVER_PAGES = re.compile(r"has (\d+) pages, exceeding the max_num_pages")
_FORMATS = {"pdf": InputFormat.PDF, "docx": InputFormat.DOCX, "pptx": InputFormat.PPTX,
            "html": InputFormat.HTML}  # fmt: skip


def pdf_pipeline() -> str:
    """``"layout"`` when ``TELHA_DOCLING__ARTIFACTS_PATH`` names docling's models (the
    layout-model pipeline), else ``"native"`` (model-free)."""
    return "layout" if os.environ.get("TELHA_DOCLING__ARTIFACTS_PATH") else "native"


@cache
def _converter() -> DocumentConverter:
    """The process's converter (docling imports and pipeline set-up are paid once)."""
    artifacts = os.environ.get("TELHA_DOCLING__ARTIFACTS_PATH", "")
    if artifacts:
        pdf = PdfFormatOption(
            pipeline_cls=StandardPdfPipeline,
            pipeline_options=PdfPipelineOptions(
                artifacts_path=artifacts, do_ocr=False, generate_page_images=False
            ),
        )
    else:
        pdf = PdfFormatOption(
            pipeline_cls=NativePdfPipeline,
            pipeline_options=NativePdfPipelineOptions(
                generate_page_images=False, generate_picture_images=False
            ),
        )
    return DocumentConverter(
        allowed_formats=list(_FORMATS.values()), format_options={InputFormat.PDF: pdf}
    )


def _pdf_needs_password(path: Path) -> bool:
    import pypdfium2

    try:
        pypdfium2.PdfDocument(str(path)).close()
    except pypdfium2.PdfiumError as exc:
        return "password" in str(exc).lower()
    return False


def _check(path: Path, fmt: str) -> None:
    with path.open("rb") as f:
        head = f.read(8)
    if fmt in ("docx", "pptx") and head.startswith(_CFB):
        raise UnsupportedFeature(
            f"encrypted: the {fmt} is an OLE/CFB container (a password-protected Office file)"
        )
    if fmt == "pdf" and _pdf_needs_password(path):
        raise UnsupportedFeature("encrypted: the PDF needs a password")


def convert(path: Path, fmt: str, max_pages: int = MAX_PAGES, ocr: str = "off") -> DoclingDocument:
    """Convert the file at ``path`` as ``fmt`` (``pdf``, ``docx``, ``pptx``, ``html``);
    ``ocr``: ``options.ocr`` (a PDF without text is the caller's to OCR unless ``off``).

    :raises UnsupportedFeature: encrypted input; a PDF without any text layer (``ocr="off"``).
    :raises CorruptInput: docling cannot read it.
    :raises ResourceLimit: more than ``max_pages`` pages.
    """
    _check(path, fmt)
    # docling picks the backend by file name: give the bytes one with the format's extension.
    with tempfile.TemporaryDirectory(prefix="telha-docling-") as folder:
        named = Path(folder) / f"input.{fmt}"
        exposed = expose_headings(path, Path(folder)) if fmt == "docx" else None
        if fmt == "html":  # docling_worker.html5: the tree a browser builds
            named.write_bytes(html5_bytes(path.read_bytes())[0])
        else:
            named.symlink_to((exposed or path).resolve())
        result: Any = _converter().convert(
            named, raises_on_error=False, max_num_pages=max_pages + 1
        )
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        detail = "; ".join(e.error_message for e in result.errors)[:300] or result.status.value
        over = _OVER_PAGES.search(detail)
        if over:  # docling refuses before parsing when the page count is over the limit
            raise ResourceLimit(f"{over.group(1)} pages is over docling.max_pages ({max_pages})")
        raise CorruptInput(f"docling cannot read this {fmt}: {detail}")
    doc: DoclingDocument = result.document
    if fmt == "pdf" and pdf_pipeline() == "native":
        mark_fonts(doc, result.pages)  # weights and bullets for docling_worker.pdf_blocks
    if len(doc.pages) > max_pages:
        raise ResourceLimit(f"{len(doc.pages)} pages is over docling.max_pages ({max_pages})")
    if fmt == "pdf" and ocr == "off" and doc.pages and not any(t.text.strip() for t in doc.texts):
        raise UnsupportedFeature(
            f"ocr_required: {len(doc.pages)} page(s) without a text layer (scanned images)"
        )
    return doc
