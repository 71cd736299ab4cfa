"""The REST front actor: hypercorn serving the starlette app on a socket we bind ourselves."""

from __future__ import annotations

import logging

import anyio
import anyio.abc
import structlog
from hypercorn.asyncio import serve
from hypercorn.config import Config as HypercornConfig
from starlette.applications import Starlette

from telha.sockets import bind_tcp

__all__ = ["RestFront"]

log = structlog.get_logger("telha.rest")


class RestFront:
    """Serves ``app`` on ``addr`` until ``shutdown`` is set, then drains in-flight requests for
    at most ``grace_s`` seconds and returns.

    ``run`` reports the bound ``"host:port"`` through ``task_status``.
    """

    def __init__(self, app: Starlette, addr: str, grace_s: float, shutdown: anyio.Event) -> None:
        self._app = app
        self._addr = addr
        self._grace_s = grace_s
        self._shutdown = shutdown
        #: Set once hypercorn has stopped and drained (or given up after the grace period).
        self.drained = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[str]) -> None:
        """Actor body; raises ``OSError`` when the address cannot be bound."""
        sock = bind_tcp(self._addr)
        host, port = sock.getsockname()[:2]
        cfg = HypercornConfig()
        cfg.bind = [f"fd://{sock.detach()}"]
        cfg.graceful_timeout = self._grace_s
        cfg.accesslog = None
        cfg.errorlog = logging.getLogger("hypercorn.error")  # through our structlog handler
        cfg.keep_alive_timeout = 75
        bound = f"{host}:{port}"
        log.info("rest_listening", addr=bound)
        task_status.started(bound)
        try:
            await serve(self._app, cfg, shutdown_trigger=self._shutdown.wait)  # type: ignore[arg-type]
        finally:
            self.drained.set()
        log.info("rest_stopped")
