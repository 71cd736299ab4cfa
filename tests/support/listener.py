"""A bare TCP listener on 127.0.0.1 for tests of what a connector does before any protocol:
each accepted connection is handed to ``handle`` on the listener's thread, then closed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["tcp_listener"]


@contextmanager
def tcp_listener(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """Listen on an ephemeral 127.0.0.1 port (yielded) until the block ends; ``handle``
    receives each connection, which is closed after it returns."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            with conn:
                handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        sock.close()
