"""The pieces every route's OpenAPI description is built from (:mod:`telha.rest.openapi`
assembles the descriptions each route module exports as ``openapi_paths()``): schema
references, parameters, the error answers the routes share and the security requirement."""

from __future__ import annotations

from typing import Any

from telha.domain.units import UNITS

__all__ = [
    "AS_OF",
    "BODY_TIMEOUT",
    "CONFLICT",
    "CONNECTOR",
    "CURSOR",
    "ERASED",
    "ERRORS",
    "INT",
    "LIMIT",
    "NODE",
    "QUOTA",
    "RATE_LIMITED",
    "REF",
    "SECURED",
    "SOURCE",
    "TX",
    "UNITS_PARAM",
    "UUID",
    "answer",
    "enum",
    "param",
    "ref",
]

#: Where a named wire schema sits in the document (``components/schemas``).
REF = "#/components/schemas/{name}"


def ref(name: str) -> dict[str, Any]:
    """A reference to the wire schema ``name`` (a :mod:`telha.wire` struct)."""
    return {"$ref": REF.format(name=name)}


def answer(name: str, description: str) -> dict[str, Any]:
    """A JSON answer whose body is the wire schema ``name``."""
    return {"description": description, "content": {"application/json": {"schema": ref(name)}}}


def param(name: str, where: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A parameter ``in`` ``where`` (path, query, header); a path one is required."""
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": schema,
        "description": description,
    }


def enum(values: tuple[str, ...]) -> dict[str, Any]:
    """A string schema of one of ``values``."""
    return {"type": "string", "enum": list(values)}


#: Every authenticated operation's security requirement (the ``x-api-key`` header).
SECURED: list[dict[str, list[str]]] = [{"apiKey": []}]

_RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds until a retry can succeed (absent when waiting cannot help)",
        "schema": {"type": "integer", "minimum": 1},
    }
}
#: The ``429`` of any ``/v1`` route (docs/rest-api.md, "Usage").
RATE_LIMITED = {
    **answer("ErrorBody", "RATE_LIMITED: over the scope's requests_per_second and burst"),
    "headers": _RETRY_AFTER,
}
#: The ``429`` of ``POST /v1/ingest``: a quota, or the rate limit.
QUOTA = {
    **answer(
        "ErrorBody",
        "QUOTA_EXCEEDED (max_pending_jobs, max_stored_bytes, max_concurrent_ingests) or"
        " RATE_LIMITED",
    ),
    "headers": _RETRY_AFTER,
}
#: The error answers every ``/v1`` route may give.
ERRORS = {
    "400": answer("ErrorBody", "INVALID_REQUEST or INVALID_CONTENT"),
    "401": answer("ErrorBody", "UNAUTHENTICATED: missing or unknown x-api-key"),
    "404": answer("ErrorBody", "NOT_FOUND (also for another scope's ids)"),
    "429": RATE_LIMITED,
}
#: The answer of every route that reads a body (telha/rest/body.py).
BODY_TIMEOUT = answer(
    "ErrorBody", "REQUEST_TIMEOUT: the body sent nothing for server.body_idle_timeout_s"
)
#: The answer of a read of erased content.
ERASED = answer(
    "ErrorBody", "CONTENT_ERASED: the content (or this version) was erased (GDPR) for good"
)
#: The answer of a change to a source being (or having been) erased.
CONFLICT = answer("ErrorBody", "CONFLICT: the source is being erased, or was erased")

UUID = {"type": "string", "format": "uuid"}
INT = {"type": "integer", "minimum": 0}
SOURCE = param("sourceId", "path", UUID, "source id")
TX = param("tx", "path", INT, "source version transaction time, µs")
NODE = param("nodeId", "path", UUID, "logical node id")
CONNECTOR = param("connectorId", "path", UUID, "connector id")
AS_OF = param("asOf", "query", INT, "transaction time, µs: the graph as it was then (default now)")
LIMIT = param(
    "limit", "query", {"type": "integer", "minimum": 1, "maximum": 1000}, "page size (100)"
)
CURSOR = param("cursor", "query", {"type": "string"}, "nextCursor of the previous page")
UNITS_PARAM = param(
    "units",
    "query",
    enum(UNITS),
    "offsets in UTF-8 bytes (default), Unicode code points (Python str indices) or UTF-16"
    " code units (JavaScript string indices)",
)
