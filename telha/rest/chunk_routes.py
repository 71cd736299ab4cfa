"""Retrieval chunks of a version (docs/rest-api.md, "Chunks"):
``GET /v1/sources/{sourceId}/versions/{tx}/chunks``.

The chunks are cut by :func:`telha.domain.chunking.chunk_text` from the version's text,
spans and nodes (one read), off the event loop for large texts, and listed a page at a
time; the cursor carries the next chunk's index and the parameters, so a page is always
cut the same way as the ones before it.
"""

from __future__ import annotations

import base64
import binascii
import re
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.chunking import (
    MAX_CHUNK_BYTES,
    MIN_CHUNK_BYTES,
    Chunk,
    Within,
    chunk_text,
    chunk_texts,
)
from telha.domain.errors import ContentErased, NotFound, RequestError
from telha.domain.ids import id_str
from telha.domain.model import Scope
from telha.domain.units import OffsetConverter, Units, parse_units
from telha.offload import off_loop
from telha.rest.access import require_access, require_admitted
from telha.rest.openapi_parts import (
    CURSOR,
    ERASED,
    ERRORS,
    LIMIT,
    SECURED,
    SOURCE,
    TX,
    UNITS_PARAM,
    answer,
    enum,
    param,
)
from telha.rest.params import parse_choice, parse_int, version_params
from telha.rest.responses import json_response
from telha.rest.state import state
from telha.wire import ChunkList, ChunkOut

__all__ = ["DEFAULT_MAX_BYTES", "openapi_paths", "routes"]

#: ``maxBytes`` when not given.
DEFAULT_MAX_BYTES = 2048
_DEFAULT_LIMIT = 100
_MAX_LIMIT = 1000
#: A cursor's chunk index: ASCII digits, at most 18 (below 2**63).
_INDEX = re.compile(r"^[0-9]{1,18}$")
_WITHIN: tuple[Within, ...] = ("section", "document")


def _parse_within(value: str | None) -> Within:
    """The ``within`` query parameter (absent: ``section``)."""
    return "document" if parse_choice(value, "within", _WITHIN) == "document" else "section"


def _cursor(index: int, max_bytes: int, overlap: int, within: Within) -> str:
    raw = f"{index}:{max_bytes}:{overlap}:{within}".encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _parse_cursor(value: str | None, max_bytes: int, overlap: int, within: Within) -> int:
    """The chunk index a ``cursor`` starts at (0 without one).

    :raises RequestError: not a cursor of this listing with these parameters.
    """
    if value is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        index, rest = raw.split(":", 1)
        # ASCII digits only, a bounded count: str.isdigit admits "²", which int() refuses.
        ok = rest == f"{max_bytes}:{overlap}:{within}" and bool(_INDEX.match(index))
    except (binascii.Error, ValueError):
        ok = False
    if not ok:
        raise RequestError("cursor is not one this listing returned with these parameters")
    return int(index)


async def _version_chunks(
    request: Request, scope: Scope, source_id: bytes, tx: int, max_bytes: int, overlap: int,
    within: Within,
) -> tuple[bytes, list[Chunk]]:  # fmt: skip
    """The version's text and chunks, cut afresh or from the cache after the store has
    confirmed the version (it raises ``NotFound``, ``ContentErased`` as a fresh cut does)."""
    st = state(request)
    key = (scope, source_id, tx, max_bytes, overlap, within)
    hit = st.chunk_cache.get(key)
    if hit is not None:
        version = next((v for v in await st.store.reads.versions(scope, source_id)
                        if v.tx == tx), None)  # fmt: skip
        if version is None:
            raise NotFound("no such source version")
        if version.erased_at is not None:
            raise ContentErased(f"source version {tx} was erased: {version.erase_reason}")
        return hit
    got = await st.store.reads.chunk_inputs(scope, source_id, tx)
    cut = partial(
        chunk_text, got.text, got.spans, got.nodes, max_bytes=max_bytes, overlap=overlap,
        within=within,
    )  # fmt: skip
    chunks = await off_loop(len(got.text), cut)
    st.chunk_cache.put(key, got.text, chunks)
    return got.text, chunks


def _out(chunk: Chunk, text: bytes, conv: OffsetConverter, units: Units) -> ChunkOut:
    ranges = [(chunk.start, chunk.end)]
    if chunk.header is not None:
        ranges.append(chunk.header)
    flat = conv.to_units([x for r in ranges for x in r], units)
    pairs = [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]
    return ChunkOut(
        index=chunk.index,
        start=pairs[0][0],
        end=pairs[0][1],
        ranges=pairs,
        text=text.decode("utf-8"),
        heading_path=list(chunk.heading_path),
        pages=list(chunk.pages) if chunk.pages is not None else None,
        node_ids=[id_str(n) for n in chunk.node_ids],
    )


async def get_chunks(request: Request) -> Response:
    """GET /v1/sources/{sourceId}/versions/{tx}/chunks?maxBytes=&overlap=&within=&units=
    &limit=&cursor= — a page of the version's retrieval chunks, in reading order."""
    access = await require_access(request)
    scope = access.scope
    source_id, tx = version_params(request)
    q = request.query_params
    max_bytes = parse_int(q.get("maxBytes"), "maxBytes")
    max_bytes = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    if not MIN_CHUNK_BYTES <= max_bytes <= MAX_CHUNK_BYTES:
        raise RequestError(f"maxBytes must be {MIN_CHUNK_BYTES}..{MAX_CHUNK_BYTES}")
    overlap = parse_int(q.get("overlap"), "overlap") or 0
    if overlap > max_bytes // 2:
        raise RequestError(f"overlap must be at most half of maxBytes ({max_bytes // 2})")
    within = _parse_within(q.get("within"))
    units = parse_units(q.get("units"))
    limit = parse_int(q.get("limit"), "limit", minimum=1) or _DEFAULT_LIMIT
    if limit > _MAX_LIMIT:
        raise RequestError(f"limit must be <= {_MAX_LIMIT}")
    first = _parse_cursor(q.get("cursor"), max_bytes, overlap, within)
    await require_admitted(request, access, source_id, "no such source version")
    text, chunks = await _version_chunks(request, scope, source_id, tx, max_bytes, overlap, within)
    page = chunks[first : first + limit]
    conv = OffsetConverter(text)
    body = [_out(c, t, conv, units) for c, t in zip(page, chunk_texts(text, page), strict=True)]
    more = first + limit < len(chunks)
    return json_response(
        ChunkList(
            source_id=id_str(source_id),
            source_version_tx=tx,
            max_bytes=max_bytes,
            overlap=overlap,
            within=within,
            units=units,
            chunks=body,
            next_cursor=_cursor(first + limit, max_bytes, overlap, within) if more else None,
        )
    )


routes = [
    Route("/v1/sources/{source_id}/versions/{tx}/chunks", get_chunks, methods=["GET"]),
]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/sources/{sourceId}/versions/{tx}/chunks": {
            "get": {
                "summary": "Retrieval chunks of one version, in reading order, paged",
                "description": (
                    "Deterministic chunks of at most maxBytes UTF-8 bytes: never cut inside"
                    " a span that fits (a longer one is cut at a sentence end, else"
                    " whitespace, else a character boundary), never across a top-level"
                    " SECTION unless within=document; a chunk of table rows repeats the"
                    " header first (its range is the chunk's second range). Pass nextCursor"
                    " as cursor with the same parameters for the next page."
                ),
                "security": SECURED,
                "parameters": [
                    SOURCE,
                    TX,
                    param(
                        "maxBytes",
                        "query",
                        {"type": "integer", "minimum": MIN_CHUNK_BYTES, "maximum": MAX_CHUNK_BYTES},
                        "the most UTF-8 bytes of a chunk's text (2048)",
                    ),
                    param(
                        "overlap",
                        "query",
                        {"type": "integer", "minimum": 0, "maximum": MAX_CHUNK_BYTES // 2},
                        "bytes a chunk may repeat of the one before, at most maxBytes/2 (0)",
                    ),
                    param(
                        "within",
                        "query",
                        enum(("section", "document")),
                        "section (default): never cross a top-level section",
                    ),
                    UNITS_PARAM,
                    LIMIT,
                    CURSOR,
                ],
                "responses": {
                    "200": answer("ChunkList", "a page of chunks"),
                    "410": ERASED,
                    "413": answer(
                        "ErrorBody", "PAYLOAD_TOO_LARGE: the version's text is over 16 MiB"
                    ),
                    **ERRORS,
                },
            },
        },
    }
