"""The worker process's HTTP endpoint (docs/operations.md, "Metrics"): ``GET /health``
(JSON liveness) and ``GET /metrics`` (Prometheus text of :class:`WorkerMetrics`), served by
hypercorn on a socket bound here (127.0.0.1 by default; port 0 picks a free port, which is
reported and logged as ``http_listening``).
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import structlog
from hypercorn.asyncio import serve
from hypercorn.config import Config as HypercornConfig
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from workers_common.metrics import WorkerMetrics

__all__ = ["bind_listener", "health_app", "serve_http"]

log = structlog.get_logger("workers_common.http")

Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


def health_app(metrics: WorkerMetrics, formats: list[str]) -> Callable[..., Any]:
    """The ASGI app: ``GET /health`` → 200 ``{"status": "ok", "worker", "formats",
    "inFlight", "polling"}``; ``GET /metrics`` → the registry in Prometheus text format;
    other paths 404, other methods 405 (JSON error bodies)."""

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path not in ("/health", "/metrics"):
            status, ctype, body = 404, "application/json", _error("NOT_FOUND", "no such path")
        elif method not in ("GET", "HEAD"):
            status, ctype = 405, "application/json"
            body = _error("METHOD_NOT_ALLOWED", "GET only")
        elif path == "/metrics":
            status, ctype, body = 200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry)
        else:
            status, ctype = 200, "application/json"
            body = json.dumps(
                {
                    "status": "ok",
                    "worker": metrics.worker,
                    "formats": formats,
                    "inFlight": metrics.held,
                    "polling": metrics.is_polling,
                }
            ).encode()
        headers = [(b"content-type", ctype.encode()), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})

    return app


def _error(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def bind_listener(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host``/``port`` (port 0 picks a free one;
    an IPv6 host when it holds ``:``), ``SO_REUSEADDR`` set.

    :raises OSError: the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


async def serve_http(
    app: Callable[..., Any],
    host: str = "127.0.0.1",
    port: int = 0,
    shutdown: anyio.Event | None = None,
    *,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` until ``shutdown`` is set (hypercorn's graceful stop:
    open keep-alive connections are closed cleanly; cancelling the task instead left asyncio
    errors in the log) or the task is cancelled; reports the bound ``(host, port)``.

    :raises OSError: the address cannot be bound (in use, not local).
    """
    sock = bind_listener(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    cfg = HypercornConfig()
    cfg.bind = [f"fd://{sock.detach()}"]
    cfg.accesslog = None
    cfg.errorlog = logging.getLogger("hypercorn.error")
    cfg.graceful_timeout = 1.0
    log.info("http_listening", host=bound_host, port=bound_port)
    task_status.started((bound_host, bound_port))
    trigger = shutdown.wait if shutdown is not None else None
    await serve(app, cfg, mode="asgi", shutdown_trigger=trigger)
