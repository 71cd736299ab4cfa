"""The connector routes' part of the OpenAPI document (:mod:`telha.rest.openapi`;
docs/connectors.md, "REST")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from telha.domain.connectors import CONNECTOR_KINDS

__all__ = ["CONNECTOR_INGEST_FIELDS", "CONNECTOR_TYPES", "connector_paths", "lookup_parameters"]

#: The fields of ``POST /v1/ingest`` only a connector token sends (docs/connectors.md,
#: "Ingesting as a connector").
CONNECTOR_INGEST_FIELDS = {
    "externalId": {
        "type": ["string", "null"],
        "description": "connector token only: the item's id in the remote",
    },
    "connector": {
        "type": ["string", "null"],
        "description": "connector token only: must be the token's own connector",
    },
    "acl": {
        "type": ["array", "null"],
        "items": {"type": "string"},
        "description": "connector token only: principals (user:…, group:…)",
    },
    "marker": {
        "type": ["string", "null"],
        "description": "connector token only: the item's change marker",
    },
}

#: The wire shapes these routes answer (added to the document's components).
CONNECTOR_TYPES = ("ConnectorOut", "ConnectorList", "ConnectorRemovedOut", "ConnectorSourceOut",
                   "RunStartedOut", "RunList")  # fmt: skip

_CONNECTOR_BODY = {
    "type": "object",
    "required": ["kind"],
    "additionalProperties": False,
    "properties": {
        "kind": {"type": "string", "enum": list(CONNECTOR_KINDS)},
        "settings": {
            "type": "object",
            "description": "the kind's settings; folder: root (absolute path inside"
            " [connectors] allowed_roots), include and exclude (lists of fnmatch patterns"
            " over the relative path); slack-export: path (absolute path of the export zip,"
            " inside [connectors] allowed_roots), channels, maxEntryBytes, maxTotalBytes"
            " (each at most its default: 256 MiB, 16 GiB)",
        },
        "every": {
            "type": ["integer", "string", "null"],
            "description": "schedule: seconds, or 15m, 1h, 1d (at least 60 s)",
        },
        "pruneMaxFraction": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "description": "most of its sources one run may retire unconfirmed (0.2)",
        },
    },
}
_RUN_BODY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"confirmPrune": {"type": "boolean"}},
}


def lookup_parameters(param: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    """``connector`` and ``externalId`` of ``GET /v1/sources``."""
    return [
        param(
            "connector",
            "query",
            {"type": "string", "format": "uuid"},
            "with externalId: the one source this connector's item names",
        ),
        param(
            "externalId",
            "query",
            {"type": "string", "minLength": 1},
            "the item's id in the remote (with connector)",
        ),
    ]


def connector_paths(
    ref: Callable[[str], dict[str, Any]],
    param: Callable[..., dict[str, Any]],
    json: Callable[[str, str], dict[str, Any]],
    errors: dict[str, Any],
    body_timeout: dict[str, Any],
    secured: list[Any],
) -> dict[str, Any]:
    """``/v1/connectors`` and ``/v1/connectors/{connectorId}[/runs]``."""
    connector = param("connectorId", "path", {"type": "string", "format": "uuid"}, "connector id")
    conflict = json("ErrorBody", "CONFLICT: a run of this connector is pending or running")
    return {
        "/v1/connectors": {
            "post": {
                "summary": "Register a connector",
                "security": secured,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _CONNECTOR_BODY}},
                },
                "responses": {
                    "201": json("ConnectorOut", "the connector"),
                    "408": body_timeout,
                    **errors,
                },
            },
            "get": {
                "summary": "The scope's connectors, oldest first",
                "security": secured,
                "responses": {"200": json("ConnectorList", "the connectors"), **errors},
            },
        },
        "/v1/connectors/{connectorId}": {
            "get": {
                "summary": "One connector",
                "security": secured,
                "parameters": [connector],
                "responses": {"200": json("ConnectorOut", "the connector"), **errors},
            },
            "delete": {
                "summary": "Remove a connector (its tokens are refused; its sources stay)",
                "security": secured,
                "parameters": [connector],
                "responses": {"200": json("ConnectorRemovedOut", "removed"), **errors},
            },
        },
        "/v1/connectors/{connectorId}/runs": {
            "post": {
                "summary": "Start a sync run",
                "security": secured,
                "parameters": [connector],
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _RUN_BODY}},
                },
                "responses": {
                    "202": json("RunStartedOut", "the run enqueued"),
                    "408": body_timeout,
                    "409": conflict,
                    "503": json("ErrorBody", "UNAVAILABLE: this server runs no sync runs"),
                    **errors,
                },
            },
            "get": {
                "summary": "The connector's runs, newest first, with their counts",
                "security": secured,
                "parameters": [
                    connector,
                    param(
                        "limit",
                        "query",
                        {"type": "integer", "minimum": 1, "maximum": 100},
                        "runs (20)",
                    ),
                ],
                "responses": {"200": json("RunList", "the runs"), **errors},
            },
        },
    }
