"""Keep CPU-heavy work off the event loop (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio

__all__ = ["OFFLOAD_BYTES", "off_loop"]

T = TypeVar("T")

#: Inputs at least this large (bytes) are processed in a worker thread; smaller ones inline,
#: where a thread hop would cost more than the work.
OFFLOAD_BYTES = 64 * 1024


async def off_loop(size: int, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, in a worker thread when ``size`` (bytes of input) is large."""
    if size >= OFFLOAD_BYTES:
        return await anyio.to_thread.run_sync(fn, *args)
    return fn(*args)
