"""OCR of page images into the same projection as a native PDF (docs/formats.md, "OCR").

A page image is turned upright (tesseract's OSD), its words recognised
(:mod:`docling_worker.tesseract`), and tesseract's lines become one docling text item each,
with page and box, like the lines of docling's ``NativePdfPipeline``: the projection then groups
them into paragraphs and headings with the same builder (:mod:`docling_worker.pdf_blocks`).
Boxes are built in the upright page and turned back into the page as given before they reach
a node, so a rotated scan's boxes lie on its page as a viewer shows it.

After the projection, :func:`annotate` gives every node placed on an OCR page
``ocr_confidence`` (the mean confidence, 0–100, of the words whose centre lies in its box;
the DOCUMENT: of all its words) and the stats ``ocr_pages``, ``ocr_seconds`` (wall time of
OCR, the one field that is not deterministic) and ``ocr_low_confidence_words`` (words under
``min_confidence``: kept, only counted).

Settings come from ``TELHA_OCR__*`` (``telha serve`` exports its ``[ocr]`` section):
``LANGUAGES`` (comma-separated tesseract language names, default ``eng``), ``DPI`` (PDF pages
are rendered at it, default 300), ``MIN_CONFIDENCE`` (30), ``MAX_PAGES`` (500) and
``PAGE_TIMEOUT_S`` (120).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docling_core.types.doc import (
    BoundingBox,
    CoordOrigin,
    DocItemLabel,
    DoclingDocument,
    PageItem,
    ProvenanceItem,
    Size,
)
from PIL import Image

from docling_worker.tesseract import Word, orientation, recognise
from workers_common import ResourceLimit

__all__ = ["OcrPage", "OcrRun", "OcrSettings", "annotate", "ocr_settings", "read_page"]

MODES = ("auto", "force", "off")


@dataclass(frozen=True, slots=True)
class OcrSettings:
    """``[ocr]``: tesseract languages, rendering resolution (dots per inch), the confidence
    under which a word counts as low (0–100), most pages per document, seconds per page."""

    languages: tuple[str, ...] = ("eng",)
    dpi: int = 300
    min_confidence: float = 30.0
    max_pages: int = 500
    page_timeout_s: float = 120.0


def ocr_settings(environ: dict[str, str] | None = None) -> OcrSettings:
    """:class:`OcrSettings` from ``TELHA_OCR__*`` (module docstring); defaults otherwise.

    :raises ValueError: a value that is not a positive number, or no language.
    """
    env = os.environ if environ is None else environ
    base = OcrSettings()
    languages = tuple(
        part.strip() for part in env.get("TELHA_OCR__LANGUAGES", "eng").split(",") if part.strip()
    )
    values = OcrSettings(
        languages,
        int(env.get("TELHA_OCR__DPI", base.dpi)),
        float(env.get("TELHA_OCR__MIN_CONFIDENCE", base.min_confidence)),
        int(env.get("TELHA_OCR__MAX_PAGES", base.max_pages)),
        float(env.get("TELHA_OCR__PAGE_TIMEOUT_S", base.page_timeout_s)),
    )
    if not languages or values.dpi <= 0 or values.max_pages <= 0 or values.page_timeout_s <= 0:
        raise ValueError("TELHA_OCR__* settings must be positive, with at least one language")
    return values


@dataclass(slots=True)
class OcrPage:
    """One recognised page. Sizes and boxes are in the output unit (``unit`` per pixel: PDF
    points or pixels), top-left origin; ``width``/``height`` of the page as given;
    ``rotation``: degrees the image was turned counter-clockwise to read upright; ``words``:
    ``(confidence, box)`` in the upright page; ``lines``: ``(text, box)`` in the upright page,
    in tesseract's reading order."""

    page: int
    width: float
    height: float
    rotation: int
    words: list[tuple[float, tuple[float, float, float, float]]] = field(default_factory=list)
    lines: list[tuple[str, tuple[float, float, float, float]]] = field(default_factory=list)

    @property
    def upright_size(self) -> tuple[float, float]:
        """``(width, height)`` of the upright page."""
        if self.rotation in (90, 270):
            return self.height, self.width
        return self.width, self.height

    def to_page(self, box: list[float]) -> list[float]:
        """A box of the upright page as a box of the page as given."""
        w, h = self.width, self.height
        x0, y0, x1, y1 = box
        if self.rotation == 90:  # upright (x', y') = (y, w - x)
            corners = [(w - y0, x0), (w - y1, x1)]
        elif self.rotation == 270:  # upright (x', y') = (h - y, x)
            corners = [(y0, h - x0), (y1, h - x1)]
        elif self.rotation == 180:
            corners = [(w - x0, h - y0), (w - x1, h - y1)]
        else:
            return box
        xs, ys = [c[0] for c in corners], [c[1] for c in corners]
        return [round(v, 2) for v in (min(xs), min(ys), max(xs), max(ys))]


@dataclass(slots=True)
class OcrRun:
    """The OCR of one document: its pages by number and the wall time spent, in seconds."""

    pages: dict[int, OcrPage] = field(default_factory=dict)
    seconds: float = 0.0


def _scaled(box: tuple[int, int, int, int], unit: float, limit: tuple[float, float]) -> Any:
    return (
        min(box[0] * unit, limit[0]), min(box[1] * unit, limit[1]),
        min(box[2] * unit, limit[0]), min(box[3] * unit, limit[1]),
    )  # fmt: skip


def _lines(words: list[Word]) -> dict[tuple[int, int, int], list[Word]]:
    lines: dict[tuple[int, int, int], list[Word]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    return lines


#: Mean word confidence under which a page's orientation is checked (OSD), 0–100.
OSD_BELOW_CONFIDENCE = 70.0


def _mean(words: list[Word]) -> float:
    return statistics.fmean(w.confidence for w in words) if words else 0.0


def read_page(
    image: Image.Image,
    page_no: int,
    unit: float,
    settings: OcrSettings,
    folder: Path,
    dpi: int | None = None,
) -> OcrPage:
    """OCR one page image (module docstring); ``unit``: output units per pixel (72/dpi for a
    PDF page, 1 for an image); ``folder``: a scratch folder for the image file tesseract reads;
    ``dpi``: the image's resolution when known.

    The page is read as it is; when the words' mean confidence is under
    :data:`OSD_BELOW_CONFIDENCE`, OSD (on a half-size copy: orientation needs no detail) says
    whether it is turned, and a turned page is read again upright, the reading with the higher
    mean confidence kept.

    :raises ResourceLimit: the page took over ``settings.page_timeout_s``.
    :raises UnsupportedFeature: tesseract or a language's data is not installed.
    """
    deadline = time.monotonic() + settings.page_timeout_s
    what = f"page {page_no}"

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ResourceLimit(f"ocr: {what} took over {settings.page_timeout_s:g} s")
        return left

    gray = image if image.mode == "L" else image.convert("L")
    width, height = gray.size
    path = folder / f"page-{page_no}.pgm"
    gray.save(path)
    languages = list(settings.languages)
    words = recognise(path, languages, remaining(), what, dpi)
    turn = 0
    if words and _mean(words) < OSD_BELOW_CONFIDENCE:
        gray.reduce(2).save(path)
        turn = orientation(path, remaining(), what, dpi // 2 if dpi else None)
        if turn:
            gray.rotate(turn, expand=True).save(path)
            upright = recognise(path, languages, remaining(), what, dpi)
            if _mean(upright) > _mean(words):
                words = upright
            else:
                turn = 0
    path.unlink()
    page = OcrPage(page_no, width * unit, height * unit, turn)
    limit = page.upright_size
    page.words = [(w.confidence, _scaled(w.box, unit, limit)) for w in words]
    for line in _lines(words).values():
        box = (min(w.box[0] for w in line), min(w.box[1] for w in line),
               max(w.box[2] for w in line), max(w.box[3] for w in line))  # fmt: skip
        page.lines.append((" ".join(w.text for w in line), _scaled(box, unit, limit)))
    return page


def add_to_document(doc: DoclingDocument, run: OcrRun) -> None:
    """Put each OCR page's lines in ``doc`` as text items (page and top-left box in the
    upright page, whose size the page gets), as the native pipeline gives a PDF's lines."""
    for number, page in sorted(run.pages.items()):
        width, height = page.upright_size
        doc.pages[number] = PageItem(page_no=number, size=Size(width=width, height=height))
        for text, (x0, y0, x1, y1) in page.lines:
            box = BoundingBox(l=x0, t=y0, r=x1, b=y1, coord_origin=CoordOrigin.TOPLEFT)
            prov = ProvenanceItem(page_no=number, bbox=box, charspan=(0, len(text)))
            doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)


def _inside(box: tuple[float, float, float, float], area: list[float]) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return area[0] <= cx <= area[2] and area[1] <= cy <= area[3]


def annotate(submission: dict[str, Any], run: OcrRun, min_confidence: float) -> None:
    """Give the nodes of ``submission`` on OCR pages ``ocr_confidence`` and their box in the
    page as given, and ``stats`` the OCR counters (module docstring)."""
    all_words = [c for page in run.pages.values() for c, _box in page.words]
    for node in submission["nodes"]:
        props = node["properties"]
        page = run.pages.get(props.get("page", -1))
        if "DOCUMENT" in node["labels"] and all_words:
            props["ocr_confidence"] = round(statistics.fmean(all_words), 1)
        if page is None or "bbox" not in props:
            continue
        inside = [c for c, box in page.words if _inside(box, props["bbox"])]
        if inside:
            props["ocr_confidence"] = round(statistics.fmean(inside), 1)
        props["bbox"] = page.to_page(props["bbox"])
    stats = submission.setdefault("stats", {})
    stats["ocr_pages"] = len(run.pages)
    stats["ocr_seconds"] = round(run.seconds, 3)
    stats["ocr_low_confidence_words"] = sum(1 for c in all_words if c < min_confidence)
