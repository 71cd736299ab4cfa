"""Ingesting as a connector (docs/connectors.md, "Ingesting as a connector"): what a
connector token may send to ``POST /v1/ingest``, the source id its item gets, and the item
row written once the ingest is accepted."""

from __future__ import annotations

import dataclasses
import uuid

from telha.domain.connectors import ConnectorItem, connector_source_id
from telha.domain.errors import Forbidden, RequestError
from telha.domain.ids import id_str, now_us
from telha.grpc.tokens import ConnectorAuth
from telha.ingest.request import IngestRequest
from telha.rest.app import AppState

__all__ = ["as_connector", "record_acl_first", "record_item"]


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
    await st.store.record_connector_item(auth.scope, item)


async def record_acl_first(st: AppState, auth: ConnectorAuth, req: IngestRequest) -> None:
    """Before ``req`` is ingested, put its ACL on the item (docs/connectors.md, "ACL"), so
    that no version it publishes is ever seen under an older, wider ACL (or, for a new
    item, under none): an item's ACL changes at once; a new item with an ACL gets its row
    now, without a marker (a run reads such an item again), completed by
    :func:`record_item` once the ingest is accepted."""
    assert req.external_id is not None and req.source_id is not None
    found = await st.store.find_connector_item(auth.scope, auth.connector_id, req.external_id)
    if found is not None:
        if found.acl != req.acl:
            item = dataclasses.replace(found, acl=req.acl, updated_at=now_us())
            await st.store.record_connector_item(auth.scope, item)
    elif req.acl is not None:
        item = ConnectorItem(
            auth.connector_id, req.external_id, req.source_id.bytes, req.name, acl=req.acl,
            updated_at=now_us(),
        )  # fmt: skip
        await st.store.record_connector_item(auth.scope, item)
