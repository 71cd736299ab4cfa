"""A TCP proxy on 127.0.0.1 that forwards to a real server and can cut a connection at a
chosen command: the ``cut_at``-th time a client→server chunk holds ``pattern``, both sides
of that connection are closed instead of forwarding it (a server that went away in the
middle of a conversation). Threads, one per connection; :meth:`close` stops listening, so
new connections are refused.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading

__all__ = ["CuttingProxy"]


class CuttingProxy:
    """Forward ``127.0.0.1:port`` to ``(host, target_port)``; ``cut_at`` (``None``: never)
    counts occurrences of ``pattern`` per connection."""

    def __init__(self, target_port: int, pattern: bytes, host: str = "127.0.0.1") -> None:
        self.pattern = pattern
        self.cut_at: int | None = None
        self.cuts = 0
        self._target = (host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client,), daemon=True).start()

    def _pump(self, client: socket.socket) -> None:
        seen = 0
        try:
            server = socket.create_connection(self._target, timeout=10)
        except OSError:
            client.close()
            return
        with client, server:
            while True:
                ready, _, _ = select.select([client, server], [], [], 60)
                if not ready:
                    return
                for sock in ready:
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    if sock is client:
                        seen += data.count(self.pattern)
                        if self.cut_at is not None and seen >= self.cut_at:
                            self.cuts += 1
                            return
                        server.sendall(data)
                    else:
                        client.sendall(data)

    def close(self) -> None:
        """Stop accepting: new connections to :attr:`port` are refused."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        with contextlib.suppress(OSError):
            self._listener.close()
