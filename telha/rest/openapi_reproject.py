"""The re-projection part of the OpenAPI document (:mod:`telha.rest.openapi`):
``POST /v1/reproject`` (docs/rest-api.md, "Re-projection")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["reproject_paths"]


def reproject_paths(
    _json: Callable[[str, str], dict[str, Any]],
    errors: dict[str, Any],
    body_timeout: dict[str, Any],
    secured: list[dict[str, list[str]]],
) -> dict[str, Any]:
    """The ``/v1/reproject`` path item, built with :mod:`telha.rest.openapi`'s helpers:
    ``_json`` (a JSON answer of a named schema), the shared error answers, the ``408`` of a
    body that stops arriving and the security requirement."""
    return {
        "/v1/reproject": {
            "post": {
                "summary": "Read outdated current versions again from their stored raw bytes",
                "description": (
                    "The scope's current versions made by another projection or other"
                    " effective options than a request would use now (of `format`, of"
                    " `sourceId`, when given) each get a job reading their stored bytes;"
                    " `dryRun` only lists them. Erased and retired sources are never"
                    " touched; versions whose raw bytes are gone are listed in rawGone."
                    " An administration route: a request acting for principals is"
                    " refused (403 FORBIDDEN), not narrowed."
                ),
                "security": secured,
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "format": {"type": "string"},
                                    "sourceId": {"type": "string"},
                                    "dryRun": {"type": "boolean"},
                                },
                            },
                        }
                    },
                },
                "responses": {
                    "200": _json("ReprojectOut", "a dry run, or nothing outdated"),
                    "202": _json("ReprojectOut", "the outdated versions' jobs, enqueued"),
                    "408": body_timeout,
                    **errors,
                },
            }
        },
    }
