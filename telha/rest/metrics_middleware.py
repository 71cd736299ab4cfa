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

from collections.abc import Iterable

from prometheus_client import Counter, Histogram
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Scope

from telha.metrics import Metrics
from telha.rest.timed_requests import UNMATCHED, TimedRequests

__all__ = ["UNMATCHED", "MetricsMiddleware"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class MetricsMiddleware(TimedRequests):
    """Wraps ``app`` (:class:`~telha.rest.timed_requests.TimedRequests`); ``metrics`` holds
    the two series."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Iterable[BaseRoute]) -> None:
        super().__init__(app, routes)
        self._requests = metrics.http_requests
        self._seconds = metrics.http_seconds
        # Label children cached: ``labels()`` takes a lock and builds a tuple per call.
        self._counts: dict[tuple[str, str, int], Counter] = {}
        self._timers: dict[tuple[str, str], Histogram] = {}

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        method = scope["method"] if scope["method"] in _METHODS else "OTHER"
        route = self.route(scope)
        key = (method, route, status)
        counter = self._counts.get(key)
        if counter is None:
            counter = self._counts[key] = self._requests.labels(method, route, str(status))
        counter.inc()
        timer = self._timers.get(key[:2])
        if timer is None:
            timer = self._timers[key[:2]] = self._seconds.labels(method, route)
        timer.observe(seconds)
