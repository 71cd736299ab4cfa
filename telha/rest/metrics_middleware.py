"""Pure ASGI middleware counting REST requests by route template and status, with latency
(``telha_http_requests_total``, ``telha_http_request_duration_seconds``).

The route label is the matched route's path template (``/v1/nodes/{node_id}``), never the raw
path, so label cardinality is bounded by the route table: starlette's router writes the
matched ``endpoint`` into the request scope, and the middleware maps it back to its route's
path. A request no route matched is labelled ``<unmatched>``; a method outside the standard
ones is labelled ``OTHER``. No ``BaseHTTPMiddleware`` (it buffers and wraps every response): bodies
stream through untouched.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Histogram
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from telha.metrics import Metrics

__all__ = ["UNMATCHED", "MetricsMiddleware"]

UNMATCHED = "<unmatched>"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class MetricsMiddleware:
    """Wraps ``app``; ``routes`` are the app's routes (their endpoints name the templates).

    Latency runs from the request's arrival to the app returning (the response sent). An
    exception escaping the app is counted as status 500 and re-raised.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Iterable[BaseRoute]) -> None:
        self._app = app
        self._requests = metrics.http_requests
        self._seconds = metrics.http_seconds
        self._templates: dict[Any, str] = {
            r.endpoint: r.path for r in routes if isinstance(r, Route)
        }
        # Label children cached: ``labels()`` takes a lock and builds a tuple per call.
        self._counts: dict[tuple[str, str, int], Counter] = {}
        self._timers: dict[tuple[str, str], Histogram] = {}

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
            self._record(scope, status, time.perf_counter() - started)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        method = scope["method"] if scope["method"] in _METHODS else "OTHER"
        route = self._templates.get(scope.get("endpoint"), UNMATCHED)
        key = (method, route, status)
        counter = self._counts.get(key)
        if counter is None:
            counter = self._counts[key] = self._requests.labels(method, route, str(status))
        counter.inc()
        timer = self._timers.get(key[:2])
        if timer is None:
            timer = self._timers[key[:2]] = self._seconds.labels(method, route)
        timer.observe(seconds)
