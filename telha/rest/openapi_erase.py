"""The erasure route's part of the OpenAPI document (:mod:`telha.rest.openapi`;
docs/operations.md, "Erasure (GDPR)")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["erase_paths"]

_BODY = {
    "type": "object",
    "required": ["reason"],
    "additionalProperties": False,
    "properties": {
        "reason": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "description": "why (kept in the erasure audit, with who and when)",
        },
        "versionTx": {
            "type": ["integer", "null"],
            "minimum": 0,
            "description": "erase only this version (transaction time, µs); default every one",
        },
    },
}


def erase_paths(
    ref: Callable[[str], dict[str, Any]],
    param: Callable[..., dict[str, Any]],
    enum: Callable[[tuple[str, ...]], dict[str, Any]],
    source: dict[str, Any],
    errors: dict[str, Any],
    secured: list[Any],
) -> dict[str, Any]:
    """``POST /v1/sources/{sourceId}/erase``, built with :mod:`telha.rest.openapi`'s helpers
    (``source``: its path parameter; ``errors``: the shared error answers)."""
    out = {
        "description": "what was erased, or with dryRun=true what would be",
        "content": {
            "application/json": {"schema": {"oneOf": [ref("ErasureOut"), ref("ErasurePreviewOut")]}}
        },
    }
    return {
        "/v1/sources/{sourceId}/erase": {
            "post": {
                "summary": "Erase a source (every version, or one) for good (GDPR)",
                "description": (
                    "Runs as an erase job (GET /v1/ingest/{erasureId} shows its steps): raw"
                    " bytes and inline job content deleted, canonical text replaced by"
                    " redaction records (length and hash), nodes scrubbed and hidden or"
                    " trimmed, span rows deleted, pending/leased jobs of the source dead"
                    " (erased), both digests of every erased version on the scope's"
                    " blocklist (a later ingest of them answers 410). Versions of other"
                    " sources sharing the bytes or canonical text are erased with it. A"
                    " repeated erase answers the same result. dryRun=true erases nothing and"
                    " answers what would be erased (ErasurePreviewOut: sources with names,"
                    " versions, node counts); its body may be empty and reason is optional."
                ),
                "security": secured,
                "parameters": [
                    source,
                    param(
                        "dryRun",
                        "query",
                        enum(("true", "false")),
                        "true: answer what would be erased (ErasurePreviewOut), erase nothing",
                    ),
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _BODY}},
                },
                "responses": {"200": out, **errors},
            }
        },
    }
