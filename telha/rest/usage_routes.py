"""``GET /v1/usage``: the calling key's scope's pending jobs, stored bytes and limits
(docs/rest-api.md, "Usage")."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.rest.app import json_response, require_scope, state
from telha.wire import LimitsOut, UsageOut

__all__ = ["routes"]


def _limit(value: float) -> float | None:
    return value if value > 0 else None


async def usage(request: Request) -> Response:
    """GET /v1/usage: ``{"pendingJobs", "storedBytes", "limits": {…}}`` of the key's own
    scope; a limit that is not set (unlimited) is ``null``."""
    scope = await require_scope(request)
    st = state(request)
    limits = await st.quotas.limits(scope)
    return json_response(
        UsageOut(
            pending_jobs=await st.store.pending_jobs(scope),
            stored_bytes=await st.store.stored_bytes(scope),
            limits=LimitsOut(
                max_pending_jobs=limits.max_pending_jobs or None,
                max_stored_bytes=limits.max_stored_bytes or None,
                requests_per_second=_limit(limits.requests_per_second),
                burst=limits.bucket_size if limits.requests_per_second > 0 else None,
            ),
        )
    )


routes = [Route("/v1/usage", usage, methods=["GET"])]
