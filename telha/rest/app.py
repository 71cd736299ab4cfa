"""The starlette application: every route module's routes, the middleware, the probes and
the one error mapping (docs/rest-api.md, "Errors"). The app factory: nothing below it
imports it (docs/architecture.md, "Import layering").

Every error leaves as ``{"error": {"code", "message"}}`` with the status its
:class:`~telha.domain.errors.TelhaError` carries; unknown routes and methods too.
"""

from __future__ import annotations

import math

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import (
    RequestTimeout,
    TelhaError,
    Unavailable,
)
from telha.ingest.request import KNOWN_FORMATS
from telha.rest import (
    cancel_routes,
    chunk_routes,
    connector_routes,
    erase_routes,
    event_routes,
    ingest_routes,
    listing_routes,
    openapi,
    page_routes,
    read_routes,
    reproject_routes,
    run_routes,
    search_routes,
    ui_routes,
    usage_routes,
    version_routes,
)
from telha.rest.access_log import AccessLogMiddleware
from telha.rest.metrics_middleware import MetricsMiddleware
from telha.rest.responses import error_response, json_response
from telha.rest.state import AppState, state
from telha.wire import ReadyOut

__all__ = ["create_app"]

log = structlog.get_logger("telha.rest")
_HTTP_CODES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 400: "INVALID_REQUEST"}


async def _telha_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TelhaError)
    if exc.http_status >= 500:
        log.error("request_failed", path=request.url.path, code=exc.code, error=exc.message)
    response = error_response(exc.code, exc.message, exc.http_status)
    retry_after = getattr(exc, "retry_after_s", None)
    if retry_after is not None:  # whole seconds, rounded up (RFC 9110 §10.2.3)
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    if isinstance(exc, RequestTimeout):  # the rest of the body is not read (RFC 9110 §15.5.9)
        response.headers["Connection"] = "close"
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "HTTP_ERROR")
    return error_response(code, str(exc.detail), exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled_error", path=request.url.path)
    return error_response("INTERNAL", "internal error", 500)


async def healthz(request: Request) -> Response:
    """Liveness: the process answers."""
    return json_response({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Readiness: 200 once storage is open and migrated, 503 while starting or stopping.
    ``formats``: the worker formats a poll stream of this process serves (in-process or
    remote), sorted (docs/operations.md, "Readiness")."""
    st = state(request)
    if not st.ready:
        raise Unavailable("not ready")
    formats = sorted(f for f in st.queue.polled_formats() if f in KNOWN_FORMATS)
    return json_response(ReadyOut(status="ready", formats=formats))


async def metrics(request: Request) -> Response:
    """Prometheus text exposition of this instance's metrics (the active-jobs gauges are
    refreshed first: two counts over the pending/leased partial indexes)."""
    st = state(request)
    await st.queue.refresh_gauges()
    await st.quotas.refresh_gauges()
    body = generate_latest(st.metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def create_app(st: AppState) -> Starlette:
    """Build the app over ``st``; the routes come from :mod:`telha.rest.ingest_routes`,
    :mod:`telha.rest.cancel_routes`, :mod:`telha.rest.event_routes`,
    :mod:`telha.rest.read_routes`, :mod:`telha.rest.chunk_routes`,
    :mod:`telha.rest.version_routes`, :mod:`telha.rest.reproject_routes`,
    :mod:`telha.rest.erase_routes`, :mod:`telha.rest.listing_routes`,
    :mod:`telha.rest.search_routes`,
    :mod:`telha.rest.openapi`, :mod:`telha.rest.page_routes` and
    :mod:`telha.rest.ui_routes` (the viewer's static files at ``/ui/``, no key)."""
    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *ingest_routes.routes,
        *cancel_routes.routes,
        *event_routes.routes,
        *read_routes.routes,
        *chunk_routes.routes,
        *version_routes.routes,
        *reproject_routes.routes,
        *erase_routes.routes,
        *listing_routes.routes,
        *search_routes.routes,
        *usage_routes.routes,
        *connector_routes.routes,
        *run_routes.routes,
        *openapi.routes,
        *page_routes.routes,
        *ui_routes.routes,
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(MetricsMiddleware, metrics=st.metrics, routes=routes),
            Middleware(AccessLogMiddleware, routes=routes),
        ],
        exception_handlers={
            TelhaError: _telha_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.telha = st
    return app
