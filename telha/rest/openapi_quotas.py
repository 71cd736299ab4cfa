"""The quotas' part of the OpenAPI document (:mod:`telha.rest.openapi`): the ``429`` answers
every ``/v1`` route may give and ``GET /v1/usage`` (docs/rest-api.md, "Usage")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["refusals", "usage_paths"]

_RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds until a retry can succeed (absent when waiting cannot help)",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def refusals(json: Callable[[str, str], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(rate_limited, quota)``: the ``429`` of any ``/v1`` route and the one of
    ``POST /v1/ingest``, built with :mod:`telha.rest.openapi`'s ``_json``."""
    rate_limited = {
        **json("ErrorBody", "RATE_LIMITED: over the scope's requests_per_second and burst"),
        "headers": _RETRY_AFTER,
    }
    quota = {
        **json(
            "ErrorBody",
            "QUOTA_EXCEEDED (max_pending_jobs, max_stored_bytes, max_concurrent_ingests) or"
            " RATE_LIMITED",
        ),
        "headers": _RETRY_AFTER,
    }
    return rate_limited, quota


def usage_paths(
    json: Callable[[str, str], dict[str, Any]], errors: dict[str, Any], secured: list[Any]
) -> dict[str, Any]:
    """``/v1/usage`` (``errors``: the document's shared error answers, 401 and 429 used)."""
    return {
        "/v1/usage": {
            "get": {
                "summary": (
                    "The key's scope's pending jobs, stored bytes, ingests in progress, open"
                    " event streams and limits"
                ),
                "security": secured,
                "responses": {
                    "200": json("UsageOut", "usage and limits (null: not limited)"),
                    "401": errors["401"],
                    "429": errors["429"],
                },
            }
        },
    }
