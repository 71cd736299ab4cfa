"""The ``X-Telha-Principals`` header in the OpenAPI document (docs/rest-api.md,
"Principals"): described on every operation whose answers it narrows."""

from __future__ import annotations

from typing import Any

__all__ = ["FILTERED", "with_principals"]

#: ``(path, method)`` of the operations that show only what the principals may see.
FILTERED = (
    ("/v1/sources", "get"),
    ("/v1/sources/{sourceId}", "get"),
    ("/v1/sources/{sourceId}", "delete"),
    ("/v1/sources/{sourceId}/versions/{tx}/text", "get"),
    ("/v1/sources/{sourceId}/versions/{tx}/spans", "get"),
    ("/v1/sources/{sourceId}/versions/{tx}/chunks", "get"),
    ("/v1/sources/{sourceId}/versions/{tx}/pages/{n}.png", "get"),
    ("/v1/sources/{sourceId}/diff", "get"),
    ("/v1/sources/{sourceId}/erase", "post"),
    ("/v1/nodes", "get"),
    ("/v1/nodes/{nodeId}", "get"),
    ("/v1/nodes/{nodeId}/edges", "get"),
    ("/v1/search", "get"),
    ("/v1/locate", "post"),
    ("/v1/ingest", "get"),
    ("/v1/ingest/{jobId}", "get"),
    ("/v1/ingest/{jobId}/events", "get"),
)

_HEADER = {
    "name": "X-Telha-Principals",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "maxLength": 26_000},
    "example": "user:alice, group:eng",
    "description": (
        "the principals the request acts for, comma-separated kind:name (at most 100):"
        " only sources without an ACL or whose ACL names one of them are shown; a source"
        " not shown answers 404 as if absent. Absent: the API key's principals (none: the"
        " whole scope). It may only narrow a key's principals. Malformed: 400."
    ),
}

_FORBIDDEN = {
    "description": "FORBIDDEN: X-Telha-Principals names a principal the key does not carry",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
}


def with_principals(paths: dict[str, Any]) -> dict[str, Any]:
    """``paths`` with the header parameter and the 403 added to each :data:`FILTERED`
    operation present (the others are left as they are)."""
    for path, method in FILTERED:
        op = paths.get(path, {}).get(method)
        if op is None:
            continue
        op["parameters"] = [*op.get("parameters", []), _HEADER]
        op.setdefault("responses", {}).setdefault("403", _FORBIDDEN)
    return paths
