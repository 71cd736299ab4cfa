"""Full-text search and quote location (docs/rest-api.md, "Search" and "Locate a quote"):
``GET /v1/search`` and ``POST /v1/locate`` over the caller's scope's current versions."""

from __future__ import annotations

import base64
import binascii
from dataclasses import replace
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.canonical import is_label
from telha.domain.errors import ContentErased, NotFound, RequestError
from telha.domain.ids import id_str
from telha.domain.model import Scope
from telha.domain.search_query import MAX_QUERY_BYTES, MAX_QUOTE_BYTES, parse_query, parse_quote
from telha.domain.units import UNITS, OffsetConverter, Units
from telha.ingest.request import KNOWN_FORMATS
from telha.rest.access import require_access
from telha.rest.body import read_body
from telha.rest.offsets import converter, units_param
from telha.rest.openapi_parts import ERRORS, SECURED, answer, param
from telha.rest.params import decode_body, parse_choice, parse_int, parse_uuid_param
from telha.rest.responses import json_response
from telha.rest.state import state
from telha.storage.api import Filters, Located, SearchHit
from telha.storage.protocol import ReadStore
from telha.wire import ByteRange, LocatedOut, SearchHitOut, SearchResult

__all__ = ["openapi_paths", "routes"]

#: Hits per page: default and most.
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
#: Places a locate answers: default and most.
LOCATE_DEFAULT = 100
LOCATE_MAX = 1000
_MAX_BODY_BYTES = 64 * 1024
_CURSOR_PREFIX = b"search:"


class LocateRequest(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """The body of ``POST /v1/locate``."""

    text: str
    source_id: str | None = None
    limit: int | None = None


def _require_enabled(request: Request) -> None:
    """:raises NotFound: the service runs with ``[search] enabled = false``."""
    if not state(request).config.search.enabled:
        raise NotFound("search is disabled on this service ([search] enabled = false)")


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(_CURSOR_PREFIX + str(offset).encode()).rstrip(b"=").decode()


def _parse_cursor(value: str | None) -> int:
    """The offset a ``cursor`` carries (0 when absent).

    :raises RequestError: not a cursor this service returned.
    """
    if value is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    digits = raw[len(_CURSOR_PREFIX) :]
    if not raw.startswith(_CURSOR_PREFIX) or not digits.isdigit() or len(digits) > 9:
        raise RequestError("cursor is not one this service returned")
    return int(digits)


def _filters(request: Request) -> Filters:
    """``sourceId``, ``format`` and ``label`` of the query.

    :raises RequestError: one of them malformed (named in the message).
    """
    params = request.query_params
    source = params.get("sourceId")
    fmt = parse_choice(params.get("format"), "format", KNOWN_FORMATS)
    label = params.get("label")
    if label is not None and not is_label(label):
        raise RequestError(f"label must be an UPPER_SNAKE label, got {label!r}")
    return Filters(
        source_id=parse_uuid_param(source, "sourceId") if source is not None else None,
        format=fmt,
        label=label,
    )


def _hit_out(hit: SearchHit, conv: OffsetConverter | None, units: Units) -> SearchHitOut:
    """A hit in ``units`` (``conv``: a converter over its span, ``None`` for bytes)."""
    flat = [hit.start, hit.end, *(x for m in hit.matches for x in m)]
    if conv is not None:
        flat = conv.to_units(flat, units)
    pairs = list(zip(flat[2::2], flat[3::2], strict=True))
    return SearchHitOut(
        node_ids=[id_str(n) for n in hit.node_ids], labels=hit.labels,
        source_id=id_str(hit.source_id), name=hit.name, source_version_tx=hit.version_tx,
        start=flat[0], end=flat[1], kind=hit.kind, snippet=hit.snippet,
        matches=[ByteRange(start=a, end=b) for a, b in pairs], page=hit.page,
        bbox=hit.bbox,
    )  # fmt: skip


async def _converters(
    reads: ReadStore, scope: Scope, places: list[tuple[bytes, int, int, int]], units: Units
) -> dict[tuple[bytes, int], OffsetConverter | None]:
    """A converter per version of ``places`` (``(source_id, tx, start, end)`` bytes) over the
    bytes they cover (docs/rest-api.md, "Offsets in other units"); none needed for bytes
    (empty), ``None`` for a version erased or gone since it was found (its places are left
    out: no offset is answered in the wrong units)."""
    if units == "byte":
        return {}
    ranges: dict[tuple[bytes, int], tuple[int, int]] = {}
    for source_id, tx, start, end in places:
        lo, hi = ranges.get((source_id, tx), (start, end))
        ranges[(source_id, tx)] = (min(lo, start), max(hi, end))
    out: dict[tuple[bytes, int], OffsetConverter | None] = {}
    for (source_id, tx), (lo, hi) in ranges.items():
        try:
            out[(source_id, tx)] = await converter(reads, scope, source_id, tx, lo, hi)
        except (NotFound, ContentErased):
            out[(source_id, tx)] = None
    return out


async def search(request: Request) -> Response:
    """GET /v1/search?q=&label=&sourceId=&format=&limit=&cursor=&units= — the scope's current
    spans matching the query, best first (with principals: of the sources they may see)."""
    access = await require_access(request)
    scope = access.scope
    _require_enabled(request)
    units = units_param(request)
    params = request.query_params
    q = params.get("q")
    if q is None:
        raise RequestError("q: required")
    terms = parse_query(q)
    filters = replace(_filters(request), principals=access.principals)
    limit = parse_int(params.get("limit"), "limit", minimum=1) or DEFAULT_LIMIT
    if limit > MAX_LIMIT:
        raise RequestError(f"limit must be at most {MAX_LIMIT}")
    offset = _parse_cursor(params.get("cursor"))
    if params.get("asOf") is not None:
        parse_int(params.get("asOf"), "asOf")
        raise RequestError(
            "asOf: search covers current versions only (the index holds no past ones)"
        )
    app = state(request)
    hits, pending = await app.store.search.page(
        scope, terms, filters, limit=limit + 1, offset=offset,
        rank_window=app.config.search.rank_window,
    )  # fmt: skip
    more = len(hits) > limit
    hits = hits[:limit]
    convs = await _converters(
        app.store.reads, scope, [(h.source_id, h.version_tx, h.start, h.end) for h in hits], units
    )
    return json_response(
        SearchResult(
            hits=[
                _hit_out(h, convs.get((h.source_id, h.version_tx)), units)
                for h in hits
                if units == "byte" or convs[(h.source_id, h.version_tx)] is not None
            ],
            next_cursor=_encode_cursor(offset + limit) if more else None,
            index_pending=pending,
        )
    )


def _parse_locate(body: bytes) -> LocateRequest:
    """The validated body of ``POST /v1/locate``.

    :raises RequestError: not a JSON object of that shape, or ``limit`` outside 1–1000.
    """
    req = decode_body(body, LocateRequest, "locate request")
    if req.limit is not None and not 1 <= req.limit <= LOCATE_MAX:
        raise RequestError(f"limit must be an integer in 1–{LOCATE_MAX}")
    return req


async def locate(request: Request) -> Response:
    """POST /v1/locate?units= {text, sourceId?, limit?} — every place of the scope's current
    versions holding the quote (with principals: of the sources they may see)."""
    access = await require_access(request)
    scope = access.scope
    _require_enabled(request)
    units = units_param(request)
    req = _parse_locate(await read_body(request, _MAX_BODY_BYTES))
    quote = parse_quote(req.text)
    source = parse_uuid_param(req.source_id, "sourceId") if req.source_id is not None else None
    store = state(request).store
    found = await store.search.locate(
        scope, quote, source_id=source, limit=req.limit or LOCATE_DEFAULT,
        principals=access.principals,
    )  # fmt: skip
    convs = await _converters(
        store.reads, scope, [(f.source_id, f.version_tx, f.start, f.end) for f in found], units
    )
    out = []
    for f in found:
        start, end = f.start, f.end
        if units != "byte":
            conv = convs[(f.source_id, f.version_tx)]
            if conv is None:
                continue
            start, end = conv.to_units([start, end], units)
        out.append(_located_out(f, start, end))
    return json_response(out)


def _located_out(f: Located, start: int, end: int) -> LocatedOut:
    return LocatedOut(
        source_id=id_str(f.source_id), source_version_tx=f.version_tx, start=start,
        end=end, node_ids=[id_str(n) for n in f.node_ids], exact=f.exact,
        match="exact" if f.exact else "folded",
    )  # fmt: skip


routes = [
    Route("/v1/search", search, methods=["GET"]),
    Route("/v1/locate", locate, methods=["POST"]),
]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    units = param(
        "units",
        "query",
        {"type": "string", "enum": list(UNITS)},
        "offsets in UTF-8 bytes (default), code points or UTF-16 units",
    )
    locate_body = {
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {
            "text": {
                "type": "string",
                "minLength": 1,
                "description": f"the quote (at most {MAX_QUOTE_BYTES} UTF-8 bytes)",
            },
            "sourceId": {"type": ["string", "null"], "format": "uuid"},
            "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000},
        },
    }
    return {
        "/v1/search": {
            "get": {
                "summary": "Full-text search over the text of every current span",
                "description": (
                    'Words (all must occur), "phrases", prefixes (term*); case, accents and'
                    " compatibility forms folded; CJK text searched character by character."
                    " Hits best"
                    " first (BM25 on SQLite, ts_rank on PostgreSQL) with the matched words'"
                    " byte ranges. asOf is refused (400): the index holds current versions."
                ),
                "security": SECURED,
                "parameters": [
                    param(
                        "q",
                        "query",
                        {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_BYTES},
                        "the query (required)",
                    ),
                    param("label", "query", {"type": "string"}, "a linked node's label"),
                    param("sourceId", "query", {"type": "string", "format": "uuid"}, "one source"),
                    param(
                        "format", "query", {"type": "string", "enum": list(KNOWN_FORMATS)}, "format"
                    ),
                    param(
                        "limit",
                        "query",
                        {"type": "integer", "minimum": 1, "maximum": 100},
                        "hits per page (20)",
                    ),
                    param("cursor", "query", {"type": "string"}, "nextCursor of the last page"),
                    param("asOf", "query", {"type": "integer", "minimum": 0}, "refused (400)"),
                    units,
                ],
                "responses": {"200": answer("SearchResult", "a page of hits"), **ERRORS},
            }
        },
        "/v1/locate": {
            "post": {
                "summary": "Every place of the current versions where a quote occurs",
                "description": (
                    "Compared after NFC and LF normalisation, runs of whitespace as one;"
                    " compared folded (case, accents, compatibility forms, ignorables) and"
                    " found inside words and overlapping; match is exact when the bytes are"
                    " the quote's, else folded."
                ),
                "security": SECURED,
                "parameters": [units],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": locate_body}},
                },
                "responses": {
                    "200": {
                        "description": "the places, by source, version and offset",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/LocatedOut"},
                                }
                            }
                        },
                    },
                    **ERRORS,
                    "408": answer(
                        "ErrorBody",
                        "REQUEST_TIMEOUT: the body sent nothing for server.body_idle_timeout_s",
                    ),
                    "413": answer("ErrorBody", "PAYLOAD_TOO_LARGE: a body over 64 KiB"),
                },
            }
        },
    }
