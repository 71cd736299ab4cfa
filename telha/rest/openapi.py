"""``GET /openapi.json``: the REST API described (OpenAPI 3.1), schemas generated from
:mod:`telha.wire` so the document cannot drift from what the handlers encode.

Each route module describes its own routes (``openapi_paths()``, beside the handlers,
built from :mod:`telha.rest.openapi_parts`); this module assembles them, in the order of
:data:`DESCRIPTIONS`, and adds the ``X-Telha-Principals`` header
(:mod:`telha.rest.openapi_principals`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha import __version__, wire
from telha.rest import (
    cancel_routes,
    chunk_routes,
    connector_routes,
    erase_routes,
    event_routes,
    ingest_routes,
    listing_routes,
    page_routes,
    probe_routes,
    read_routes,
    reproject_routes,
    run_routes,
    search_routes,
    usage_routes,
    version_routes,
)
from telha.rest.openapi_parts import REF
from telha.rest.openapi_principals import with_principals
from telha.wire import connectors as wire_connectors

__all__ = ["DESCRIPTIONS", "openapi_document", "routes"]

#: Each route module's description (``openapi_paths``), in the document's order (a path
#: two modules serve, such as ``/v1/ingest``, holds the methods of both).
DESCRIPTIONS: tuple[Callable[[], dict[str, Any]], ...] = (
    ingest_routes.openapi_paths,
    listing_routes.openapi_paths,
    cancel_routes.openapi_paths,
    event_routes.openapi_paths,
    read_routes.openapi_paths,
    version_routes.openapi_paths,
    erase_routes.openapi_paths,
    chunk_routes.openapi_paths,
    probe_routes.openapi_paths,
    search_routes.openapi_paths,
    page_routes.openapi_paths,
    usage_routes.openapi_paths,
    reproject_routes.openapi_paths,
    connector_routes.openapi_paths,
    run_routes.openapi_paths,
)

#: The connector wire shapes the document adds to :mod:`telha.wire`'s (components).
CONNECTOR_TYPES = ("ConnectorOut", "ConnectorList", "ConnectorRemovedOut", "ConnectorSourceOut",
                   "RunStartedOut", "RunList")  # fmt: skip


def _paths() -> dict[str, Any]:
    """Every route module's paths, merged (a path's methods from each module serving it)."""
    paths: dict[str, dict[str, Any]] = {}
    for described in DESCRIPTIONS:
        for path, methods in described().items():
            taken = paths.setdefault(path, {})
            twice = taken.keys() & methods.keys()
            assert not twice, f"{path} {sorted(twice)} described twice"
            taken.update(methods)
    paths["/openapi.json"] = {
        "get": {
            "summary": "This document",
            "responses": {"200": {"description": "OpenAPI 3.1"}},
        },
    }
    return paths


@functools.cache
def openapi_document() -> bytes:
    """The OpenAPI 3.1 document as JSON bytes (built once)."""
    types = [getattr(wire, name) for name in wire.__all__]
    types += [getattr(wire_connectors, name) for name in CONNECTOR_TYPES]
    _, components = msgspec.json.schema_components(types, ref_template=REF)
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "Telha", "version": __version__},
        "paths": with_principals(_paths()),
        "components": {
            "schemas": components,
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}},
        },
    }
    return msgspec.json.encode(doc)


async def openapi_json(request: Request) -> Response:
    """GET /openapi.json."""
    return Response(openapi_document(), media_type="application/json")


routes = [Route("/openapi.json", openapi_json, methods=["GET"])]
