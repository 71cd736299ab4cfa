"""The access log: one ``request`` line at info per REST request, whatever its status
(docs/operations.md, "Logs").

Fields: ``method``, ``route`` (the matched route's path template, ``/v1/ingest/{job_id}``;
``<unmatched>`` when none matched: never the raw path), ``status``, ``duration_ms`` (from
arrival until the app returned) and, once the request's API key was resolved, the key's scope
(``tenant_id``, ``organization_id``). Never a key, a header or a body
(:mod:`telha.rest.timed_requests`: bodies stream through untouched).
"""

from __future__ import annotations

from typing import Any

import structlog
from starlette.types import Scope

from telha.domain.model import Scope as KeyScope
from telha.rest.timed_requests import TimedRequests

__all__ = ["SCOPE_KEY", "AccessLogMiddleware"]

log = structlog.get_logger("telha.access")

#: The ASGI scope key where :func:`telha.rest.access.require_access` leaves the key's scope.
SCOPE_KEY = "telha.scope"


class AccessLogMiddleware(TimedRequests):
    """Wraps ``app`` (:class:`~telha.rest.timed_requests.TimedRequests`): one ``request``
    line per HTTP request."""

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        fields: dict[str, Any] = {
            "method": scope["method"],
            "route": self.route(scope),
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
        }
        key_scope = scope.get(SCOPE_KEY)
        if isinstance(key_scope, KeyScope):
            fields["tenant_id"] = key_scope.tenant_id
            fields["organization_id"] = key_scope.organization_id
        log.info("request", **fields)
