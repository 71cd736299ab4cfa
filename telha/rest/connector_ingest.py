"""Ingesting as a connector (docs/connectors.md, "Ingesting as a connector"): the connector a
request's token speaks for (:func:`connector_identity`), what a connector token may send to
``POST /v1/ingest``, the source id its item gets, and the item row written once the ingest
is accepted."""

from __future__ import annotations

import dataclasses
import uuid

from starlette.requests import Request

from telha.domain.connectors import ConnectorItem, connector_source_id
from telha.domain.errors import Forbidden, RequestError, Unauthenticated
from telha.domain.ids import id_str, now_us
from telha.ingest.request import IngestRequest
from telha.rest.access_log import SCOPE_KEY
from telha.rest.state import AppState, state
from telha.tokens import ConnectorAuth, InvalidToken, verify_connector_token

__all__ = [
    "CONNECTOR_TOKEN_HEADER",
    "as_connector",
    "connector_identity",
    "record_acl_first",
    "record_item",
]

#: The header a connector token travels in (docs/connectors.md, "Connector tokens").
CONNECTOR_TOKEN_HEADER = "x-connector-token"


def as_connector(req: IngestRequest, auth: ConnectorAuth | None) -> IngestRequest:
    """``req`` with its connector item's source id set (docs/architecture.md, "Identity"):
    ``connector_source_id(connector, tenant, externalId)``.

    :raises Forbidden: an API key's request naming a connector field (only a connector
        token ingests as a connector), a connector token's request without ``externalId``
        (it ingests only as its connector), or naming another ``connector``.
    :raises RequestError: ``connector`` is not a UUID.
    """
    if auth is None:
        if req.as_connector:
            raise Forbidden(
                "connector, externalId, acl and marker are a connector token's fields;"
                " an API key ingests by name only"
            )
        return req
    mine = id_str(auth.connector_id)
    if req.connector is not None:
        try:
            named = str(uuid.UUID(req.connector))
        except ValueError:
            raise RequestError(f"connector must be a UUID, got {req.connector!r}") from None
        if named != mine:
            raise Forbidden("a connector token ingests only as its own connector")
    if req.external_id is None:
        raise Forbidden("a connector token ingests only as its connector: externalId is required")
    source_id = connector_source_id(mine, auth.scope.tenant_id, req.external_id)
    return dataclasses.replace(req, connector=mine, source_id=source_id)


async def record_item(
    st: AppState, auth: ConnectorAuth, req: IngestRequest, source_id: uuid.UUID
) -> None:
    """Write the item row of ``req``'s (connector, external id) once its ingest is accepted
    (applied, enqueued or deduplicated): its name, change marker and ACL as now, live."""
    assert req.external_id is not None
    item = ConnectorItem(
        auth.connector_id, req.external_id, source_id.bytes, req.name, marker=req.marker,
        size=len(req.raw) if req.raw is not None else None, acl=req.acl, updated_at=now_us(),
    )  # fmt: skip
    await st.store.connectors.record_item(auth.scope, item)


async def record_acl_first(st: AppState, auth: ConnectorAuth, req: IngestRequest) -> None:
    """Before ``req`` is ingested, put its ACL on the item (docs/connectors.md, "ACL"), so
    that no version it publishes is ever seen under an older, wider ACL (or, for a new
    item, under none): an item's ACL changes at once; a new item with an ACL gets its row
    now, without a marker (a run reads such an item again), completed by
    :func:`record_item` once the ingest is accepted."""
    assert req.external_id is not None and req.source_id is not None
    found = await st.store.connectors.find_item(auth.scope, auth.connector_id, req.external_id)
    if found is not None:
        if found.acl != req.acl:
            item = dataclasses.replace(found, acl=req.acl, updated_at=now_us())
            await st.store.connectors.record_item(auth.scope, item)
    elif req.acl is not None:
        item = ConnectorItem(
            auth.connector_id, req.external_id, req.source_id.bytes, req.name, acl=req.acl,
            updated_at=now_us(),
        )  # fmt: skip
        await st.store.connectors.record_item(auth.scope, item)


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
    if await st.store.connectors.get(auth.scope, auth.connector_id) is None:
        raise Unauthenticated("connector token: its connector was removed")
    request.scope[SCOPE_KEY] = auth.scope
    await st.quotas.admit(token, auth.scope)
    return auth
