"""``GET /v1/usage``: the calling key's scope's pending jobs, stored bytes, ingests in
progress, open event streams and limits (docs/rest-api.md, "Usage")."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.rest.access import require_scope
from telha.rest.openapi_parts import ERRORS, SECURED, answer
from telha.rest.responses import json_response
from telha.rest.state import state
from telha.wire import LimitsOut, UsageOut

__all__ = ["openapi_paths", "routes"]


def _limit(value: float) -> float | None:
    return value if value > 0 else None


async def usage(request: Request) -> Response:
    """GET /v1/usage: ``{"pendingJobs", "storedBytes", "ingestsInProgress", "eventStreams",
    "limits": {…}}`` of the key's own scope; a limit that is not set (unlimited) is ``null``;
    the slot counts and shares are this replica's."""
    scope = await require_scope(request)
    st = state(request)
    limits = await st.quotas.limits(scope)
    ingests, streams = st.ingest_slots, st.event_streams
    return json_response(
        UsageOut(
            pending_jobs=await st.store.quotas.pending_jobs(scope),
            stored_bytes=await st.store.quotas.stored_bytes(scope),
            ingests_in_progress=ingests.held(scope),
            event_streams=streams.held(scope),
            limits=LimitsOut(
                max_pending_jobs=limits.max_pending_jobs or None,
                max_stored_bytes=limits.max_stored_bytes or None,
                requests_per_second=_limit(limits.requests_per_second),
                burst=limits.bucket_size if limits.requests_per_second > 0 else None,
                max_concurrent_ingests=ingests.cap(limits.max_concurrent_ingests),
                max_event_streams=streams.cap(limits.max_event_streams),
            ),
        )
    )


routes = [Route("/v1/usage", usage, methods=["GET"])]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/usage": {
            "get": {
                "summary": (
                    "The key's scope's pending jobs, stored bytes, ingests in progress, open"
                    " event streams and limits"
                ),
                "security": SECURED,
                "responses": {
                    "200": answer("UsageOut", "usage and limits (null: not limited)"),
                    "401": ERRORS["401"],
                    "429": ERRORS["429"],
                },
            }
        },
    }
