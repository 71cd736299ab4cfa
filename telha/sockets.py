"""The listening sockets the fronts bind themselves (so each reports its real port, and
tests can bind port 0): the REST front's hypercorn gets ``fd://N``, the gRPC front's grpclib
``Server.start(sock=…)`` (docs/architecture.md, "Actors and channels")."""

from __future__ import annotations

import socket

from telha.config import split_addr
from workers_common.http import bind_listener

__all__ = ["bind_tcp"]


def bind_tcp(addr: str) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one), backlog 1,024.

    :raises OSError: the address cannot be bound.
    """
    host, port = split_addr(addr)
    return bind_listener(host, port, backlog=1024)
