"""The starlette application: every route module's routes, the middleware, the probes and
the one error mapping (docs/rest-api.md, "Errors"). The app factory: nothing below it
imports it (docs/architecture.md, "Layering").

Every error leaves as ``{"error": {"code", "message"}}`` with the status its
:class:`~telha.domain.errors.TelhaError` carries; unknown routes and methods too.
"""

from __future__ import annotations

import math

import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from telha.domain.errors import RequestTimeout, TelhaError
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
    probe_routes,
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
from telha.rest.responses import error_response
from telha.rest.state import AppState
from telha.rest.unread_body import CloseOnUnreadBody

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


def create_app(st: AppState) -> Starlette:
    """Build the app over ``st``: the routes of every route module (``telha/rest/*_routes.py``:
    the probes first, the viewer's static files at ``/ui/`` last, no key) and of
    :mod:`telha.rest.openapi`, behind the metrics and access-log middleware and
    :class:`~telha.rest.unread_body.CloseOnUnreadBody`."""
    routes = [
        *probe_routes.routes,
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
            Middleware(CloseOnUnreadBody),
        ],
        exception_handlers={
            TelhaError: _telha_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.telha = st
    return app
