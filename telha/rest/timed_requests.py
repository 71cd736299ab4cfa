"""The base of the REST front's request observers (the metrics and the access log): a pure
ASGI middleware — no ``BaseHTTPMiddleware``, so bodies stream through untouched — that takes
each HTTP request's status and duration and hands them, with the matched route's path
template, to its subclass.

The template comes from the route table: starlette's router writes the matched ``endpoint``
into the request scope, and :meth:`TimedRequests.route` maps it back to its route's path
(``/v1/nodes/{node_id}``), never the raw path; a request no route matched is
:data:`UNMATCHED`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["UNMATCHED", "TimedRequests"]

#: The route of a request no route matched.
UNMATCHED = "<unmatched>"


class TimedRequests:
    """Wraps ``app``; ``routes`` are the app's routes (their endpoints name the templates).

    The duration runs from the request's arrival to the app returning (the response sent),
    in seconds. An exception escaping the app is recorded as status 500 and re-raised.
    """

    def __init__(self, app: ASGIApp, routes: Iterable[BaseRoute]) -> None:
        self._app = app
        self._templates: dict[Any, str] = {
            r.endpoint: r.path for r in routes if isinstance(r, Route)
        }

    def route(self, scope: Scope) -> str:
        """The path template of the route the request matched, or :data:`UNMATCHED`."""
        return self._templates.get(scope.get("endpoint"), UNMATCHED)

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
        """Record one finished request (the subclass's part)."""
        raise NotImplementedError
