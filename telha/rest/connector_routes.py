"""The connector routes (docs/connectors.md, "REST"): ``POST/GET /v1/connectors``,
``GET/DELETE /v1/connectors/{connectorId}``; the connector token's identity
(:func:`connector_identity`) and the externalId lookup of ``GET /v1/sources``
(:func:`lookup_source`)."""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.connector_roots import check_roots
from telha.domain.acl import admits
from telha.domain.connectors import (
    ConnectorRecord,
    check_connector,
    check_external_id,
)
from telha.domain.errors import NotFound, RequestError, Unauthenticated
from telha.domain.ids import id_str, new_id, now_us
from telha.domain.model import Scope
from telha.grpc.tokens import ConnectorAuth, InvalidToken, verify_connector_token
from telha.rest.access_log import SCOPE_KEY
from telha.rest.app import (
    Access,
    json_response,
    parse_uuid,
    parse_uuid_param,
    require_scope,
    state,
)
from telha.rest.body import read_body
from telha.rest.listing_routes import source_summary_out
from telha.wire_connectors import (
    ConnectorList,
    ConnectorOut,
    ConnectorRemovedOut,
    ConnectorSourceOut,
)
from workers_common.secret_grants import parse_grants

__all__ = ["CONNECTOR_TOKEN_HEADER", "connector_identity", "lookup_source", "routes"]

#: The header a connector token travels in (docs/connectors.md, "Connector tokens").
CONNECTOR_TOKEN_HEADER = "x-connector-token"

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


async def connector_identity(request: Request) -> ConnectorAuth | None:
    """The connector a request's ``x-connector-token`` speaks for (``None``: no such
    header), once its connector is known live in its scope and its rate limit admits the
    request.

    :raises Unauthenticated: a bad, expired or forged token, or its connector removed.
    """
    token = request.headers.get(CONNECTOR_TOKEN_HEADER)
    if token is None:
        return None
    st = state(request)
    try:
        auth = verify_connector_token(st.token_key, token)
    except InvalidToken as exc:
        raise Unauthenticated(str(exc)) from None
    if await st.store.get_connector(auth.scope, auth.connector_id) is None:
        raise Unauthenticated("connector token: its connector was removed")
    request.scope[SCOPE_KEY] = auth.scope
    await st.quotas.admit(token, auth.scope)
    return auth


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
        path outside ``[connectors] allowed_roots`` (:func:`telha.connector_roots.check_roots`);
        a ``passwordEnv`` that ``[connectors] secrets`` lists grants for but not to this scope.
    """
    scope = await require_scope(request)
    kind, settings, every_s, fraction = check_connector(await _body(request))
    roots = state(request).config.connectors.allowed_roots
    await anyio.to_thread.run_sync(check_roots, kind, settings, roots)
    _check_secret(state(request).config.connectors.secrets, scope, settings)
    record = ConnectorRecord(new_id(), kind, settings, every_s, fraction, now_us())
    await state(request).store.add_connector(scope, record)
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
    rows = await state(request).store.list_connectors(scope)
    return json_response(ConnectorList(connectors=[connector_out(c) for c in rows]))


async def _connector(request: Request, scope: Scope) -> ConnectorRecord:
    connector_id = parse_uuid(request.path_params["connector_id"], "connector")
    found = await state(request).store.get_connector(scope, connector_id)
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
    if not await state(request).store.remove_connector(scope, found.connector_id, now_us=at):
        raise NotFound("no such connector")
    return json_response(
        ConnectorRemovedOut(connector_id=id_str(found.connector_id), removed=True, removed_at=at)
    )


async def lookup_source(request: Request, access: Access, q: QueryParams) -> Response:
    """``GET /v1/sources?connector=ID&externalId=X``: the source a connector's item names
    and its ``rootNodeId`` (:class:`~telha.wire_connectors.ConnectorSourceOut`).

    :raises RequestError: ``connector`` not a UUID, ``externalId`` missing or bad, or other
        listing parameters given with them.
    :raises NotFound: the connector made no source for that external id, or its ACL
        admits none of the request's principals (:func:`telha.domain.acl.admits`).
    """
    extra = sorted(set(q) - {"connector", "externalId"})
    if extra:
        raise RequestError(f"connector/externalId lookup takes no other parameter: {extra}")
    connector_id = parse_uuid_param(q["connector"], "connector")
    if "externalId" not in q:
        raise RequestError("externalId is required with connector")
    external_id = check_external_id(q["externalId"])
    store, scope = state(request).store, access.scope
    item = await store.find_connector_item(scope, connector_id, external_id)
    if item is None or not admits(item.acl, access.principals):
        raise NotFound("no source for that connector and externalId")
    summary = await store.source_summary(scope, item.source_id)
    if summary is None:
        raise NotFound("no source for that connector and externalId")
    versions = await store.source_versions(scope, item.source_id)
    root = versions[0].root_node_id if versions else None
    listed = source_summary_out(summary)
    return json_response(
        ConnectorSourceOut(
            connector_id=id_str(connector_id),
            external_id=external_id,
            source_id=id_str(item.source_id),
            name=versions[0].name if versions else summary.name,
            state=listed.state,
            latest_version_tx=listed.latest_version_tx,
            root_node_id=id_str(root) if root else None,
            acl=item.acl,
            retired=item.retired_at is not None,
        )
    )


routes = [
    Route("/v1/connectors", create_connector, methods=["POST"]),
    Route("/v1/connectors", list_connectors, methods=["GET"]),
    Route("/v1/connectors/{connector_id}", get_connector, methods=["GET"]),
    Route("/v1/connectors/{connector_id}", delete_connector, methods=["DELETE"]),
]
