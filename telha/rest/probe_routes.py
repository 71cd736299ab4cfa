"""The probes and the metrics: ``GET /healthz`` (liveness), ``GET /readyz`` (readiness) and
``GET /metrics`` (Prometheus), none behind a key (docs/operations.md)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import Unavailable
from telha.ingest.request import KNOWN_FORMATS
from telha.rest.openapi_parts import answer
from telha.rest.responses import json_response
from telha.rest.state import state
from telha.wire import ReadyOut

__all__ = ["openapi_paths", "routes"]


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


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/healthz": {
            "get": {"summary": "Liveness", "responses": {"200": {"description": "alive"}}},
        },
        "/readyz": {
            "get": {
                "summary": "Readiness",
                "description": "200 {status: ready, formats: [...]}: formats lists the worker"
                " formats a worker of this process polls (in-process or remote over gRPC);"
                " a job of another format waits (its GET carries a hint).",
                "responses": {
                    "200": answer("ReadyOut", "ready"),
                    "503": answer("ErrorBody", "UNAVAILABLE"),
                },
            },
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {"200": {"description": "text exposition format"}},
            },
        },
    }
