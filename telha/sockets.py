"""The listening sockets the fronts bind themselves (so each reports its real port, and
tests can bind port 0): the REST front's hypercorn gets ``fd://N``, the gRPC front's grpclib
``Server.start(sock=…)`` (docs/architecture.md, "Actors and channels")."""

from __future__ import annotations

import socket

from telha.config import split_addr

__all__ = ["bind_tcp"]


def bind_tcp(addr: str) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one)."""
    host, port = split_addr(addr)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock
