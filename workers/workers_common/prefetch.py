"""``ahead``: build a stream's next submissions while core applies the current one.

A generator handler normally waits for ``ids = yield submission`` before it builds the next
partial, so parsing and core's apply take turns. A handler whose later partials need none of
the ids core returns (its cross-partial references are deterministic ids) can wrap its
submission iterator in :func:`ahead`: a background thread runs it up to ``depth`` submissions
ahead (a bounded queue: memory stays bounded by ``depth`` partials), and the handler's
generator only hands them on. The ids sent back are ignored.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import Any, TypeVar, cast

__all__ = ["ahead"]

T = TypeVar("T")

_END = object()
_POLL_S = 0.1


def ahead(source: Iterator[T], depth: int = 1) -> Generator[T, Any, None]:
    """Yield ``source``'s items, produced by a background thread up to ``depth`` items ahead.

    An exception raised by ``source`` is re-raised here, at the point where its item would
    have been yielded. Closing the returned generator (the consumer abandons the job) stops
    the thread after the item it is building, and closes ``source`` there.

    :param depth: items built (or being built) ahead of the one handed on, at most (>= 1).
    """
    items: queue.Queue[tuple[object, BaseException | None]] = queue.Queue()
    # Held while an item is built or waits to be taken: at most ``depth`` exist beside the
    # one the consumer is handing on (memory: depth + 1 items, not depth + 2).
    room = threading.Semaphore(depth)
    stop = threading.Event()

    def wait_for_room() -> bool:
        while not stop.is_set():
            if room.acquire(timeout=_POLL_S):
                return True
        return False

    def produce() -> None:
        try:
            iterator = iter(source)
            while wait_for_room():
                try:
                    item = next(iterator)
                except StopIteration:
                    items.put((_END, None))
                    return
                items.put((item, None))
        except BaseException as exc:  # handed to the consuming side, raised there
            items.put((_END, exc))
        finally:
            close = getattr(source, "close", None)
            if stop.is_set() and close is not None:
                close()

    thread = threading.Thread(target=produce, name="telha-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = items.get()
            if error is not None:
                raise error
            if item is _END:
                return
            room.release()
            yield cast(T, item)
    finally:
        stop.set()
        thread.join()
