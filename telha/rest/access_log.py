"""The access log: one ``request`` line at info per REST request, whatever its status
(docs/operations.md, "Logs").

Fields: ``method``, ``route`` (the matched route's path template, ``/v1/ingest/{job_id}``;
``<unmatched>`` when none matched: never the raw path), ``status``, ``duration_ms`` (from
arrival until the app returned) and, once the request's API key was resolved, the key's scope
(``tenant_id``, ``organization_id``). Never a key, a header or a body. Pure ASGI middleware
(no ``BaseHTTPMiddleware``): bodies stream through untouched.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import structlog
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from telha.domain.model import Scope as KeyScope

__all__ = ["SCOPE_KEY", "AccessLogMiddleware"]

log = structlog.get_logger("telha.access")

#: The ASGI scope key where :func:`telha.rest.app.require_scope` leaves the key's scope.
SCOPE_KEY = "telha.scope"
_UNMATCHED = "<unmatched>"


class AccessLogMiddleware:
    """Wraps ``app``; ``routes`` are the app's routes (their endpoints name the templates).
    An exception escaping the app is logged as status 500 and re-raised."""

    def __init__(self, app: ASGIApp, routes: Iterable[BaseRoute]) -> None:
        self._app = app
        self._templates: dict[Any, str] = {
            r.endpoint: r.path for r in routes if isinstance(r, Route)
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, send_status)
        except Exception:
            status = 500
            raise
        finally:
            self._log(scope, status, time.perf_counter() - started)

    def _log(self, scope: Scope, status: int, seconds: float) -> None:
        fields: dict[str, Any] = {
            "method": scope["method"],
            "route": self._templates.get(scope.get("endpoint"), _UNMATCHED),
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
        }
        key_scope = scope.get(SCOPE_KEY)
        if isinstance(key_scope, KeyScope):
            fields["tenant_id"] = key_scope.tenant_id
            fields["organization_id"] = key_scope.organization_id
        log.info("request", **fields)
