"""Rendering a PDF page for ``GET …/pages/{n}.png`` (telha/rest/page_routes.py): the image's
size follows the page's size in points and the scale (capped), a page past the end is
``None``, bytes that are not a PDF are refused as content; the page cache drops the least
recently used past its byte cap."""

from __future__ import annotations

import io

import pypdfium2 as pdfium
import pytest
from PIL import Image

from telha.domain.errors import ContentError
from telha.rest.page_routes import MAX_SIDE_PX, PageCache, RenderedPage, render_page


def _pdf(*sizes: tuple[float, float]) -> bytes:
    doc = pdfium.PdfDocument.new()
    for width, height in sizes:
        doc.new_page(width, height)
    out = io.BytesIO()
    doc.save(out)
    doc.close()
    return out.getvalue()


def test_a_page_renders_at_its_size_times_the_scale() -> None:
    pdf = _pdf((200, 100), (300, 400))
    first = render_page(pdf, 1, 1.0)
    assert first is not None and (first.width_pt, first.height_pt) == (200, 100)
    assert Image.open(io.BytesIO(first.png)).size == (200, 100)
    second = render_page(pdf, 2, 1.5)
    assert second is not None and (second.width_pt, second.height_pt) == (300, 400)
    assert Image.open(io.BytesIO(second.png)).size == (450, 600)
    assert render_page(pdf, 3, 1.0) is None


def test_a_huge_page_is_capped() -> None:
    page = render_page(_pdf((14400, 7200)), 1, 4.0)  # 200 in × 100 in
    assert page is not None
    assert max(Image.open(io.BytesIO(page.png)).size) <= MAX_SIDE_PX


def test_bytes_that_are_not_a_pdf_are_refused() -> None:
    with pytest.raises(ContentError, match="not a PDF"):
        render_page(b"plain text, not a PDF", 1, 1.0)


def test_the_cache_drops_the_least_recently_used() -> None:
    cache = PageCache(max_bytes=25)
    page = lambda n: RenderedPage(bytes(10), float(n), 1.0)  # noqa: E731
    cache.put(("a",), page(1))
    cache.put(("b",), page(2))
    assert cache.get(("a",)) is not None  # a is now the most recent
    cache.put(("c",), page(3))  # 30 bytes > 25: b goes
    assert cache.get(("b",)) is None
    assert cache.get(("a",)) is not None and cache.get(("c",)) is not None
    cache.put(("big",), RenderedPage(bytes(26), 1.0, 1.0))  # over the cap alone: not kept
    assert cache.get(("big",)) is None and cache.get(("a",)) is not None
