"""Where OCR'd pages come from (docs/formats.md, "OCR"): the pages of a PDF without a text
layer (or every page, ``options.ocr = "force"``), rendered with pypdfium2 at ``[ocr] dpi``
(boxes in PDF points), and the frames of an image file — ``png``, ``jpeg``, ``tiff`` (each
frame of a multi-page TIFF is a page), ``bmp``, ``webp`` — read with Pillow (boxes in pixels).

Failures: an image Pillow cannot read, or whose frames are truncated → ``corrupt_input``; more
pages to OCR than ``[ocr] max_pages``, or an image over Pillow's decompression-bomb limit →
``resource_limit``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from docling_core.types.doc import DoclingDocument
from PIL import Image, ImageSequence, UnidentifiedImageError

from docling_worker.ocr import OcrRun, OcrSettings, add_to_document, read_page
from docling_worker.tesseract import check_languages
from workers_common import CorruptInput, ResourceLimit

__all__ = ["IMAGE_FORMATS", "image_document", "ocr_pdf_pages"]

#: Image formats ``docling_worker`` reads through OCR.
IMAGE_FORMATS = ("png", "jpeg", "tiff", "bmp", "webp")


def _check_pages(count: int, settings: OcrSettings) -> None:
    if count > settings.max_pages:
        raise ResourceLimit(f"{count} pages to OCR is over ocr.max_pages ({settings.max_pages})")


_Pages = Iterator[tuple[int, Image.Image, float, int | None]]


def _run(pages: _Pages, settings: OcrSettings) -> OcrRun:
    check_languages(list(settings.languages))
    run = OcrRun()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="telha-ocr-") as folder:
        for number, image, unit, dpi in pages:
            run.pages[number] = read_page(image, number, unit, settings, Path(folder), dpi)
    run.seconds = time.monotonic() - started
    return run


def ocr_pdf_pages(
    doc: DoclingDocument, path: Path, mode: str, settings: OcrSettings
) -> tuple[DoclingDocument, OcrRun]:
    """OCR the pages of the PDF at ``path`` that ``mode`` names (``auto``: those without
    text in ``doc``; ``force``: all) and add their lines
    (:func:`docling_worker.ocr.add_to_document`) to ``doc`` (``auto``) or to a new document
    without the native text (``force``); returns that document and the run.

    :raises ResourceLimit: more pages to OCR than ``[ocr] max_pages``; a page over
        ``[ocr] page_timeout_s``.
    """
    import pypdfium2

    pdf = pypdfium2.PdfDocument(str(path))
    try:
        total = len(pdf)
        with_text = {t.prov[0].page_no for t in doc.texts if t.prov and t.text.strip()}
        wanted = [n for n in range(1, total + 1) if mode == "force" or n not in with_text]
        if not wanted:  # every page has its text layer: no OCR (nor tesseract) needed
            return doc, OcrRun()
        _check_pages(len(wanted), settings)
        if mode == "force":
            doc = DoclingDocument(name=doc.name)
        scale = settings.dpi / 72

        def rendered() -> _Pages:
            for number in wanted:
                bitmap = pdf[number - 1].render(scale=scale, grayscale=True)
                yield number, bitmap.to_pil(), 72 / settings.dpi, settings.dpi

        run = _run(rendered(), settings)
    finally:
        pdf.close()
    add_to_document(doc, run)
    return doc, run


def _resolution(image: Image.Image) -> int | None:
    dpi = image.info.get("dpi")
    try:
        value = round(float(dpi[0])) if dpi else 0
    except (TypeError, ValueError, IndexError):
        return None
    return value if 70 <= value <= 2400 else None


def _gray(frame: Image.Image) -> Image.Image:
    """The frame in 8-bit grey; a transparent background becomes white (not black)."""
    if frame.mode in ("RGBA", "LA", "PA") or "transparency" in frame.info:
        rgba = frame.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("L")
    return frame.convert("L")


def _frames(path: Path, fmt: str, settings: OcrSettings) -> list[tuple[Image.Image, int | None]]:
    try:
        with Image.open(path) as image:
            count = getattr(image, "n_frames", 1)
            _check_pages(count, settings)
            frames = []
            for frame in ImageSequence.Iterator(image):
                frame.load()
                frames.append((_gray(frame), _resolution(frame)))
            return frames
    except Image.DecompressionBombError as exc:
        raise ResourceLimit(f"image: {exc}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        raise CorruptInput(f"cannot read this {fmt} image: {exc}") from None


def image_document(path: Path, fmt: str, name: str, settings: OcrSettings) -> tuple[
    DoclingDocument, OcrRun
]:  # fmt: skip
    """A document of the image file at ``path``: one page per frame, OCR'd (module
    docstring); boxes in pixels.

    :raises CorruptInput: not a readable image.
    :raises ResourceLimit: too many frames, or a decompression bomb.
    """
    frames = _frames(path, fmt, settings)
    doc = DoclingDocument(name=name or "image")
    run = _run(((n, f, 1.0, dpi) for n, (f, dpi) in enumerate(frames, start=1)), settings)
    add_to_document(doc, run)
    return doc, run


def parse(
    path: Path, fmt: str, name: str, max_pages: int, mode: str
) -> tuple[DoclingDocument, OcrRun | None]:
    """The document at ``path`` for the projection and its OCR run (``None`` when nothing was
    OCR'd): an image through OCR; a PDF through docling, then its pages without text (or
    all, per ``mode``: ``auto``, ``force``, ``off``) through OCR; other formats through
    docling alone (:func:`docling_worker.convert.convert`).

    :raises WorkerFailure: as :func:`docling_worker.convert.convert`, :func:`image_document`
        and :func:`ocr_pdf_pages`.
    """
    from docling_worker.convert import convert
    from docling_worker.ocr import ocr_settings

    if fmt in IMAGE_FORMATS:
        return image_document(path, fmt, name, ocr_settings())
    doc = convert(path, fmt, max_pages, ocr=mode)
    if fmt != "pdf" or mode == "off":
        return doc, None
    run_doc, run = ocr_pdf_pages(doc, path, mode, ocr_settings())
    return run_doc, (run if run.pages else None)
