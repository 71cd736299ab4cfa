"""``docling_worker``: PDF, DOCX, PPTX and HTML through docling, and scanned pages and
images (``png``, ``jpeg``, ``tiff``, ``bmp``, ``webp``) through Tesseract OCR (docs/formats.md).

Conversion (:mod:`docling_worker.convert`), the projection
(:mod:`docling_worker.projection`, with the document ambiguity rules of
:mod:`workers_common.doc_ambiguity`) and parsing in warm child processes with a memory
ceiling and a timeout (:mod:`docling_worker.isolation`) are in place and tested on the corpus.
PDF text is laid out without models from the PDF's own facts (line boxes, fonts, weights:
paragraphs, headings with levels, columns, lists, running headers and footers;
:mod:`docling_worker.pdf_lines`, :mod:`docling_worker.pdf_blocks`); large submissions stream
as partials. Not yet: the golden DoclingDocument fixtures cover the layout-model path with one
document so far. The parent
process never imports docling: only the children do.

One submission per document; ``stats`` as :func:`docling_worker.projection.project_document`
gives them. Options: ``clarify`` (report temporal ambiguities), ``ocr`` (``auto``: OCR the PDF
pages without a text layer, the default; ``force``: every page; ``off``: a PDF without text
fails ``ocr_required``; :mod:`docling_worker.ocr`). Deterministic: the same bytes give the same
submission (``stats.ocr_seconds`` aside). A missing ``tesseract`` is logged when the module is
loaded; OCR jobs then fail ``unsupported_feature: ocr_unavailable``. A PDF docling-parse cannot
read (refused, a crashed or timed-out child) is read again by pypdfium2
(:mod:`docling_worker.pdf_text`, ``stats.pdf_extractor``) before the job fails with the first
failure. Empty input follows :mod:`workers_common.empty` (a DOCUMENT alone, no child process).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import msgspec

from docling_worker.isolation import pool
from docling_worker.tesseract import binary as tesseract_binary
from workers_common import (
    CorruptInput,
    IngestionResultBuilder,
    Job,
    ResourceLimit,
    TransientFailure,
    UnsupportedFeature,
)
from workers_common.empty import is_empty
from workers_common.format_options import option_names
from workers_common.projection import installed
from workers_common.splitter import stream_submission

__all__ = ["FORMATS", "PROJECTION_VERSION", "handle", "parser_versions"]

#: The image formats read through OCR (as :data:`docling_worker.ocr_sources.IMAGE_FORMATS`,
#: which the parent does not import: it loads Pillow and docling).
IMAGE_FORMATS = ("png", "jpeg", "tiff", "bmp", "webp")
FORMATS = ("pdf", "docx", "pptx", "html", *IMAGE_FORMATS)
#: How this worker reads bytes (:mod:`workers_common.projection`): raise it whenever the same
#: bytes and options would project differently.
PROJECTION_VERSION = 2


def parser_versions() -> dict[str, str]:
    """The installed versions of the parsers that shape this worker's output:
    docling's converters, pdfium, Pillow and selectolax (lexbor, the HTML5 parser)."""
    return installed("docling-slim", "docling-core", "pypdfium2", "pillow", "selectolax")


_OCR_MODES = ("auto", "force", "off")
if tesseract_binary() is None:
    logging.getLogger("docling_worker").warning(
        "ocr_unavailable: tesseract not found (install Debian's tesseract-ocr, "
        "tesseract-ocr-eng and tesseract-ocr-osd: `make setup` does); scanned PDF pages and "
        "images will fail unsupported_feature: ocr_unavailable"
    )
#: Submissions larger than this (JSON bytes) are streamed as partials (~2 MiB).
STREAM_OVER_BYTES = 2 * 1024 * 1024
_OPTIONS = frozenset(option_names("pdf"))  # workers_common.format_options
#: In a ``resource_limit`` over the page limit: no other extractor is tried.
_OVER_PAGES = "docling.max_pages"


def handle(job: Job) -> bytes | Iterator[dict[str, Any]]:
    """Convert and project one document job in a child process; returns the submission JSON,
    or, over :data:`STREAM_OVER_BYTES`, streams it as partials
    (:func:`workers_common.splitter.stream_submission`).

    :raises UnsupportedFeature: an unknown option, encrypted input, a PDF without text, a
        document of nothing but pictures/charts/formulas/footnotes.
    :raises CorruptInput: docling cannot read the file.
    :raises ResourceLimit: over the page limit.
    """
    unknown = sorted(set(job.options) - _OPTIONS)
    if unknown:
        raise UnsupportedFeature(f"option: unknown option(s) {', '.join(unknown)}")
    ocr = job.options.get("ocr", "auto")
    if ocr not in _OCR_MODES:
        raise UnsupportedFeature(f"option: ocr must be one of {', '.join(_OCR_MODES)}, not {ocr!r}")
    if job.format in IMAGE_FORMATS and ocr == "off":
        raise UnsupportedFeature("ocr_required: an image is read only through OCR (ocr=off)")
    if is_empty(job):  # workers_common.empty: the DOCUMENT alone
        b = IngestionResultBuilder()
        b.add_node(["DOCUMENT"], {"name": job.name, "format": job.format}, id=job.root_node_id)
        b.set_stats({"empty": True})
        return b.to_json()
    clarify = bool(job.options.get("clarify"))
    with job.local_path() as path:
        try:
            body = pool().convert(path, job.format, job.name, clarify=clarify, ocr=ocr)
        except (CorruptInput, TransientFailure, ResourceLimit) as first:
            if job.format != "pdf" or _OVER_PAGES in str(first):
                raise
            # docling-parse could not read it (refused, crashed or hung): pypdfium2's text.
            try:
                body = pool().convert(
                    path, "pdf", job.name, clarify=clarify, ocr=ocr, extractor="pypdfium2"
                )
            except (CorruptInput, TransientFailure, ResourceLimit):
                raise first from None
    if len(body) <= STREAM_OVER_BYTES:
        return body  # core gives the DOCUMENT (the first node) job.root_node_id, if any
    submission = msgspec.json.decode(body)
    if job.root_node_id is not None:  # a stream's DOCUMENT comes last: it carries the id
        submission["nodes"][0].setdefault("id", job.root_node_id)
    return stream_submission(submission)
