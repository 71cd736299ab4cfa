"""A PDF version's pages as PNG images (docs/rest-api.md, "Pages"):
``GET /v1/sources/{sourceId}/versions/{tx}/pages/{n}.png?scale=``.

The page is rendered from the version's raw bytes (the stored upload, or the job payload's
inline content) with pypdfium2 in a worker thread, one render at a time (PDFium is not
thread-safe), and kept in a small LRU cache by (scope, version, page, scale): the viewer asks
for the same page again each time a node on it is selected.
"""

from __future__ import annotations

import base64
import io
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import ContentErased, ContentError, NotFound, RequestError
from telha.domain.model import Scope, SourceVersion
from telha.offload import off_loop
from telha.rest.access import require_access, require_admitted
from telha.rest.openapi_parts import ERASED, ERRORS, SECURED, SOURCE, TX, param
from telha.rest.params import version_params
from telha.rest.state import AppState, state

__all__ = [
    "MAX_SCALE",
    "MIN_SCALE",
    "PageCache",
    "RenderedPage",
    "openapi_paths",
    "render_page",
    "routes",
]

MIN_SCALE = 0.25
MAX_SCALE = 4.0
#: A rendered page's longest side is capped (pixels), whatever the scale: a poster-sized
#: page at scale 4 would otherwise make a bitmap of hundreds of megabytes.
MAX_SIDE_PX = 6000
_PAGE = re.compile(r"^[0-9]{1,6}$")
_render_lock = threading.Lock()  # PDFium is not thread-safe: one render at a time
#: Renders waiting for the one at work wait here, on the event loop, not in worker threads
#: (a waiting thread would hold one of anyio's 40 that uploads and text reads also use).
_render_turn = anyio.Lock()


@dataclass(frozen=True, slots=True)
class RenderedPage:
    """A page as PNG bytes, and the page's size in PDF points (1/72 in): a node's ``bbox``
    (points, top-left origin) over this size is its box as fractions of the image."""

    png: bytes
    width_pt: float
    height_pt: float


class PageCache:
    """Rendered pages by key, least recently used dropped past ``max_bytes`` of PNG in total."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._max = max_bytes
        self._size = 0
        self._items: OrderedDict[tuple[object, ...], RenderedPage] = OrderedDict()

    def get(self, key: tuple[object, ...]) -> RenderedPage | None:
        """The page under ``key``, or ``None``."""
        page = self._items.get(key)
        if page is not None:
            self._items.move_to_end(key)
        return page

    def put(self, key: tuple[object, ...], page: RenderedPage) -> None:
        """Keep ``page`` under ``key`` (not kept when its PNG alone is over the cap)."""
        if len(page.png) > self._max or key in self._items:
            return
        self._items[key] = page
        self._size += len(page.png)
        while self._size > self._max:
            _, old = self._items.popitem(last=False)
            self._size -= len(old.png)


_cache = PageCache()


class _Inline(msgspec.Struct):
    content_b64: str = ""


def render_page(pdf: bytes, page: int, scale: float) -> RenderedPage | None:
    """Page ``page`` (1-based) of ``pdf`` rendered at ``scale`` (1 = 72 dpi: one pixel per
    PDF point; the longest side capped at :data:`MAX_SIDE_PX`); ``None`` when the document
    has no such page. Blocking: run it in a worker thread.

    :raises ContentError: the bytes are not a PDF PDFium opens (400 INVALID_CONTENT).
    """
    import pypdfium2 as pdfium  # docling's PDF backend; imported on first use only

    with _render_lock:
        return _render(pdfium, pdf, page, scale)


def _render(pdfium: Any, pdf: bytes, page: int, scale: float) -> RenderedPage | None:
    try:
        doc = pdfium.PdfDocument(pdf)
    except pdfium.PdfiumError as exc:
        raise ContentError(
            f"the version's bytes are not a PDF that can be rendered: {exc}"
        ) from None
    try:
        if page > len(doc):
            return None
        pdf_page = doc[page - 1]
        width, height = pdf_page.get_size()
        side = max(width, height) * scale
        if side > MAX_SIDE_PX:
            scale = scale * MAX_SIDE_PX / side
        image = pdf_page.render(scale=scale).to_pil()
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=False)
        return RenderedPage(out.getvalue(), float(width), float(height))
    finally:
        doc.close()


def _page_number(raw: str) -> int:
    if not raw.endswith(".png") or not _PAGE.match(raw[:-4]) or int(raw[:-4]) < 1:
        raise RequestError(f"page must be a page number from 1, as {{n}}.png; got {raw!r}")
    return int(raw[:-4])


def _scale(raw: str | None) -> float:
    """The ``scale`` query parameter, rounded to 3 decimals (so the cache keys are few)."""
    if raw is None:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not MIN_SCALE <= value <= MAX_SCALE:  # NaN fails too
        raise RequestError(f"scale must be a number from {MIN_SCALE} to {MAX_SCALE}; got {raw!r}")
    return round(value, 3)


async def _raw_bytes(st: AppState, scope: Scope, version: SourceVersion) -> bytes:
    """The version's raw bytes: the stored upload, else its job payload's inline content.

    :raises NotFound: neither is kept any more (retention removed the job and the bytes).
    """
    parts: list[bytes] = []
    try:
        async for _, data, _ in st.store.raw.read(scope, version.content_hash):
            parts.append(data)
        return b"".join(parts)
    except NotFound:
        pass
    job = await st.queue.get(scope, version.job_id, events=False) if version.job_id else None
    payload = job.payload if job is not None else b"{}"
    raw = await off_loop(len(payload), _inline_content, payload)
    if not raw:
        raise NotFound("the raw bytes of this version are no longer kept")
    return raw


def _inline_content(payload: bytes) -> bytes:
    """The raw bytes a job payload carries inline (``content_b64``), empty when none."""
    return base64.b64decode(msgspec.json.decode(payload, type=_Inline).content_b64)


async def page_png(request: Request) -> Response:
    """GET /v1/sources/{sourceId}/versions/{tx}/pages/{n}.png?scale= — page ``n`` (from 1)
    of a PDF version as ``image/png``, ``scale`` (0.25–4, default 1) pixels per PDF point.
    404: no such source, version or page, or not a PDF; 410: the version was erased."""
    access = await require_access(request)
    scope = access.scope
    source_id, tx = version_params(request)
    page = _page_number(request.path_params["page"])
    scale = _scale(request.query_params.get("scale"))
    await require_admitted(request, access, source_id, "no such source version")
    st = state(request)
    version = next((v for v in await st.store.reads.versions(scope, source_id) if v.tx == tx), None)
    if version is None:
        raise NotFound("no such source version")
    if version.erased_at is not None:
        raise ContentErased("this version was erased")
    if version.format != "pdf":
        raise NotFound(f"pages are rendered for PDF sources only (this one is {version.format})")
    key = (scope, source_id, tx, page, scale)
    rendered = _cache.get(key)
    if rendered is None:
        raw = await _raw_bytes(st, scope, version)
        async with _render_turn:
            rendered = await anyio.to_thread.run_sync(render_page, raw, page, scale)
        if rendered is None:
            raise NotFound(f"no page {page} in this version")
        _cache.put(key, rendered)
    headers = {
        "cache-control": "private, max-age=3600",
        "x-page-size": f"{rendered.width_pt:g} {rendered.height_pt:g}",
    }
    return Response(rendered.png, media_type="image/png", headers=headers)


routes = [
    Route("/v1/sources/{source_id}/versions/{tx}/pages/{page}", page_png, methods=["GET"]),
]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/sources/{sourceId}/versions/{tx}/pages/{n}.png": {
            "get": {
                "summary": "Page n of a PDF version rendered as PNG",
                "description": (
                    "Rendered server-side from the version's raw bytes (PDFium), cached by"
                    " version, page and scale. At scale s one PDF point is s pixels, so a"
                    " node's bbox (points, top-left origin) times s is its box in the image."
                ),
                "security": SECURED,
                "parameters": [
                    SOURCE,
                    TX,
                    param("n", "path", {"type": "integer", "minimum": 1}, "page number, from 1"),
                    param(
                        "scale",
                        "query",
                        {"type": "number", "minimum": MIN_SCALE, "maximum": MAX_SCALE},
                        "pixels per PDF point (default 1: 72 dpi)",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the page",
                        "headers": {
                            "x-page-size": {
                                "description": "the page's width and height in PDF points",
                                "schema": {"type": "string"},
                            }
                        },
                        "content": {
                            "image/png": {"schema": {"type": "string", "format": "binary"}}
                        },
                    },
                    "410": ERASED,
                    **ERRORS,
                },
            }
        },
    }
