"""The search routes' part of the OpenAPI document (:mod:`telha.rest.openapi`)."""

from __future__ import annotations

from typing import Any

from telha.domain.search_query import MAX_QUERY_BYTES, MAX_QUOTE_BYTES
from telha.domain.units import UNITS

__all__ = ["search_paths"]


def search_paths(
    param: Any, json: Any, errors: dict[str, Any], secured: list[Any], formats: tuple[str, ...]
) -> dict[str, Any]:
    """``/v1/search`` and ``/v1/locate``, built with :mod:`telha.rest.openapi`'s helpers
    (``param(name, where, schema, description)``, ``json(schema name, description)``)."""
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
                "security": secured,
                "parameters": [
                    param(
                        "q",
                        "query",
                        {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_BYTES},
                        "the query (required)",
                    ),
                    param("label", "query", {"type": "string"}, "a linked node's label"),
                    param("sourceId", "query", {"type": "string", "format": "uuid"}, "one source"),
                    param("format", "query", {"type": "string", "enum": list(formats)}, "format"),
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
                "responses": {"200": json("SearchResult", "a page of hits"), **errors},
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
                "security": secured,
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
                    **errors,
                    "408": json(
                        "ErrorBody",
                        "REQUEST_TIMEOUT: the body sent nothing for server.body_idle_timeout_s",
                    ),
                    "413": json("ErrorBody", "PAYLOAD_TOO_LARGE: a body over 64 KiB"),
                },
            }
        },
    }
