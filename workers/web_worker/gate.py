"""Per-origin politeness of one worker process (docs/formats.md): at most one fetch per
origin at a time, and at least ``delay_s`` seconds between the end of one fetch of an origin
and the start of the next. A fetch holds its turn for its whole browser work: the context
and page made, the navigation (until ``wait_until``), ``wait_for``, a non-HTML re-fetch, the
rendered HTML read and the context closed (the projection happens outside it), so one origin
has at most one page in the browser. Other origins are not held up. Remote worker processes
do not coordinate: each keeps its own gate.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

__all__ = ["OriginGate"]

#: Origins remembered before idle ones are pruned, and how old "idle" is (seconds).
_MAX_IDLE_SLOTS = 1024
_FORGET_AFTER_S = 60.0


@dataclass
class _Slot:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    last_end: float = float("-inf")  # time.monotonic() at the end of the last fetch
    users: int = 0


class OriginGate:
    """Serializes fetches per origin (``scheme://host:port``)."""

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}

    @contextlib.asynccontextmanager
    async def turn(self, origin: str, delay_s: float) -> AsyncIterator[None]:
        """Hold ``origin``'s turn for the duration of the ``with`` block (one fetch), after
        waiting for the previous holder and ``delay_s`` seconds after it finished."""
        if len(self._slots) > _MAX_IDLE_SLOTS:
            self._prune()
        slot = self._slots.setdefault(origin, _Slot())
        slot.users += 1
        try:
            async with slot.lock:
                wait = slot.last_end + delay_s - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                try:
                    yield
                finally:
                    slot.last_end = time.monotonic()
        finally:
            slot.users -= 1
            if slot.users == 0 and delay_s <= 0:
                self._slots.pop(origin, None)

    def _prune(self) -> None:
        """Forget origins nobody waits for whose last fetch is over a minute old (longer than
        any sensible delay), so a long crawl of many sites does not grow the map forever."""
        now = time.monotonic()
        for origin, slot in list(self._slots.items()):
            if slot.users == 0 and now - slot.last_end > _FORGET_AFTER_S:
                del self._slots[origin]
