"""Supervision of long-lived actors (docs/architecture.md): a crashed actor is logged and restarted
with exponential backoff; more than ``max_restarts`` crashes within ``window_s`` seconds is a
crash loop, which ends the process with a non-zero exit.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import structlog

__all__ = ["CrashLoop", "Supervisor"]

log = structlog.get_logger("telha.service.supervisor")

#: An actor body: ``async def run(*, task_status)``.
ActorRun = Callable[..., Awaitable[Any]]


class CrashLoop(Exception):
    """An actor crashed more than the supervisor allows; the process must exit non-zero."""


class _ReportOnce:
    """Forwards the first ``started(value)`` to the supervisor's caller; restarts are silent."""

    def __init__(self, outer: anyio.abc.TaskStatus[Any]) -> None:
        self._outer = outer
        self.reported = False

    def started(self, value: Any = None) -> None:
        if not self.reported:
            self.reported = True
            self._outer.started(value)


class Supervisor:
    """Starts actors in ``tg`` and restarts them when they crash.

    :param tg: the task group actors run in (nesting order is start order).
    :param max_restarts: crashes tolerated per actor within ``window_s`` seconds.
    :param backoff_base_s: first restart delay; doubles per crash up to ``backoff_max_s``.
    """

    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        *,
        max_restarts: int = 5,
        window_s: float = 60.0,
        backoff_base_s: float = 0.2,
        backoff_max_s: float = 10.0,
    ) -> None:
        self._tg = tg
        self._max = max_restarts
        self._window = window_s
        self._base = backoff_base_s
        self._cap = backoff_max_s

    async def start(self, name: str, run: ActorRun) -> Any:
        """Start ``run`` and return what it reported through ``task_status.started``.

        A crash before that first report is a start-up failure and propagates.
        """
        return await self._tg.start(self._supervise, name, run)

    async def _supervise(
        self, name: str, run: ActorRun, *, task_status: anyio.abc.TaskStatus[Any]
    ) -> None:
        crashes: deque[float] = deque()
        status = _ReportOnce(task_status)
        while True:
            try:
                await run(task_status=status)
                return
            except Exception as exc:
                if not status.reported:
                    raise
                now = time.monotonic()
                crashes.append(now)
                while crashes and crashes[0] < now - self._window:
                    crashes.popleft()
                if len(crashes) > self._max:
                    log.error("actor_crash_loop", actor=name, crashes=len(crashes))
                    raise CrashLoop(
                        f"{name} crashed {len(crashes)} times in {self._window}s"
                    ) from exc
                delay = min(self._cap, self._base * 2 ** (len(crashes) - 1))
                log.exception("actor_crashed", actor=name, restart_in_s=delay)
                await anyio.sleep(delay)
