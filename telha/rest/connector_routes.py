"""The connector routes (docs/connectors.md, "REST"): ``POST/GET /v1/connectors``,
``GET/DELETE /v1/connectors/{connectorId}``. The connector token's identity is in
:mod:`telha.rest.connector_ingest`, the externalId lookup of ``GET /v1/sources`` in
:mod:`telha.rest.listing_routes`."""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.connectors.roots import check_roots
from telha.domain.connectors import (
    CONNECTOR_KINDS,
    ConnectorRecord,
    check_connector,
)
from telha.domain.errors import NotFound, RequestError
from telha.domain.ids import id_str, new_id, now_us
from telha.domain.model import Scope
from telha.rest.access import require_scope
from telha.rest.body import read_body
from telha.rest.openapi_parts import BODY_TIMEOUT, CONNECTOR, ERRORS, SECURED, answer
from telha.rest.params import parse_uuid
from telha.rest.responses import json_response
from telha.rest.state import state
from telha.wire.connectors import (
    ConnectorList,
    ConnectorOut,
    ConnectorRemovedOut,
)
from workers_common.secret_grants import parse_grants

__all__ = ["openapi_paths", "routes"]

#: Largest ``POST /v1/connectors`` body (settings are small).
_MAX_BODY = 64 * 1024


def connector_out(c: ConnectorRecord) -> ConnectorOut:
    """A connector as the wire shows it."""
    return ConnectorOut(
        connector_id=id_str(c.connector_id),
        kind=c.kind,
        settings=c.settings,
        every=c.every_s,
        prune_max_fraction=c.prune_max_fraction,
        created_at=c.created_at,
    )


async def _body(request: Request) -> dict[str, Any]:
    raw = await read_body(request, _MAX_BODY)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise RequestError("request body: not JSON") from None
    if not isinstance(body, dict):
        raise RequestError("request body: a JSON object is required")
    return body


async def create_connector(request: Request) -> Response:
    """POST /v1/connectors: register a connector (201 with it).

    :raises RequestError: an unknown kind or field, settings the kind refuses, a bad
        schedule or prune fraction (:func:`telha.domain.connectors.check_connector`); a
        path outside ``[connectors] allowed_roots`` (:func:`telha.connectors.roots.check_roots`);
        a ``passwordEnv`` that ``[connectors] secrets`` lists grants for but not to this scope.
    """
    scope = await require_scope(request)
    kind, settings, every_s, fraction = check_connector(await _body(request))
    roots = state(request).config.connectors.allowed_roots
    await anyio.to_thread.run_sync(check_roots, kind, settings, roots)
    _check_secret(state(request).config.connectors.secrets, scope, settings)
    record = ConnectorRecord(new_id(), kind, settings, every_s, fraction, now_us())
    await state(request).store.connectors.add(scope, record)
    return json_response(connector_out(record), 201)


def _check_secret(entries: list[str], scope: Scope, settings: dict[str, Any]) -> None:
    """Refuse a ``passwordEnv`` not granted to ``scope`` when this server's ``[connectors]
    secrets`` lists grants (empty: the workers' own grants decide at the run;
    docs/connectors.md, "The imap kind")."""
    var = settings.get("passwordEnv")
    if not entries or not isinstance(var, str):
        return
    if f"{scope.tenant_id}/{scope.organization_id}" not in parse_grants(entries).get(var, ()):
        raise RequestError(
            f"settings.passwordEnv: {var} is not granted to this scope ([connectors] secrets)"
        )


async def list_connectors(request: Request) -> Response:
    """GET /v1/connectors: the scope's connectors, oldest first."""
    scope = await require_scope(request)
    rows = await state(request).store.connectors.listed(scope)
    return json_response(ConnectorList(connectors=[connector_out(c) for c in rows]))


async def _connector(request: Request, scope: Scope) -> ConnectorRecord:
    connector_id = parse_uuid(request.path_params["connector_id"], "connector")
    found = await state(request).store.connectors.get(scope, connector_id)
    if found is None:
        raise NotFound("no such connector")
    return found


async def get_connector(request: Request) -> Response:
    """GET /v1/connectors/{connectorId}: one connector (404 in another scope or removed)."""
    scope = await require_scope(request)
    return json_response(connector_out(await _connector(request, scope)))


async def delete_connector(request: Request) -> Response:
    """DELETE /v1/connectors/{connectorId}: remove a connector. Its tokens are refused from
    then on and it never runs again; the sources it created stay (retire them with
    ``DELETE /v1/sources/{id}``).

    :raises NotFound: no such connector in the scope (or removed already).
    """
    scope = await require_scope(request)
    found = await _connector(request, scope)
    at = now_us()
    if not await state(request).store.connectors.remove(scope, found.connector_id, now_us=at):
        raise NotFound("no such connector")
    return json_response(
        ConnectorRemovedOut(connector_id=id_str(found.connector_id), removed=True, removed_at=at)
    )


routes = [
    Route("/v1/connectors", create_connector, methods=["POST"]),
    Route("/v1/connectors", list_connectors, methods=["GET"]),
    Route("/v1/connectors/{connector_id}", get_connector, methods=["GET"]),
    Route("/v1/connectors/{connector_id}", delete_connector, methods=["DELETE"]),
]


#: The ``POST /v1/connectors`` body, described.
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


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/connectors": {
            "post": {
                "summary": "Register a connector",
                "security": SECURED,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _CONNECTOR_BODY}},
                },
                "responses": {
                    "201": answer("ConnectorOut", "the connector"),
                    "408": BODY_TIMEOUT,
                    **ERRORS,
                },
            },
            "get": {
                "summary": "The scope's connectors, oldest first",
                "security": SECURED,
                "responses": {"200": answer("ConnectorList", "the connectors"), **ERRORS},
            },
        },
        "/v1/connectors/{connectorId}": {
            "get": {
                "summary": "One connector",
                "security": SECURED,
                "parameters": [CONNECTOR],
                "responses": {"200": answer("ConnectorOut", "the connector"), **ERRORS},
            },
            "delete": {
                "summary": "Remove a connector (its tokens are refused; its sources stay)",
                "security": SECURED,
                "parameters": [CONNECTOR],
                "responses": {"200": answer("ConnectorRemovedOut", "removed"), **ERRORS},
            },
        },
    }
