"""The forward proxy every request of the web worker goes through (docs/formats.md, "Web
pages: destinations").

:func:`guard` listens on 127.0.0.1 (a free port) for one fetch: the fetch's browser context
(every navigation, redirect hop, subresource, ``fetch``/XHR, iframe and WebSocket of its
pages: Chromium sends them all to the context's proxy, loopback included) and its HTTP
clients (robots.txt, non-HTML re-fetches) use it. For each request the proxy resolves the
host once, checks every address with
:meth:`~workers_common.destinations.Destinations.check` and connects to the first allowed
address itself (:func:`workers_common.checked_connect.connect_checked`, the same checked
connection webhook deliveries use), so what was checked is what is connected to.
``CONNECT host:port`` (HTTPS, WebSockets) is tunnelled; a plain ``http://`` request is
forwarded with ``Connection: close`` (one request per connection, so each is checked).

A server that cannot be reached is answered ``502`` with an ``X-Telha-Upstream-Error``
header (Chromium's name for the error) and recorded in :attr:`Guard.failed`.
A refused request is answered ``403`` with an ``X-Telha-Refused`` header naming the address
and the rule (a refused ``CONNECT`` makes Chromium fail with ``ERR_TUNNEL_CONNECTION_FAILED``)
and recorded in :attr:`Guard.refused`, which the fetch reads: a refused navigation ends the
job ``host_not_allowed``, refused subresources are counted in ``stats.blocked_requests``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from workers_common.checked_connect import Refused, connect_checked
from workers_common.destinations import Destinations
from workers_common.hosts import IPAddress, normalise_host

__all__ = ["REFUSED_HEADER", "UPSTREAM_ERROR_HEADER", "Guard", "Refusal", "guard"]

log = logging.getLogger("web_worker")

#: Header of the proxy's ``403`` for a refused plain-HTTP request.
REFUSED_HEADER = "x-telha-refused"
#: Header of the proxy's ``502`` when the server could not be reached (Chromium's name for
#: the error: ``ERR_CONNECTION_REFUSED``, ``ERR_NAME_NOT_RESOLVED`` …).
UPSTREAM_ERROR_HEADER = "x-telha-upstream-error"
#: Largest request or response head read (bytes), and seconds to connect upstream.
_MAX_HEAD = 64 * 1024
_CONNECT_S = 15.0
_CHUNK = 64 * 1024
_HOP_HEADERS = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization"}
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused request: the host asked for (normalised), the port, and why (names the
    address)."""

    host: str
    port: int
    reason: str


@dataclass(slots=True)
class Guard:
    """One fetch's proxy: its URL and what it refused, in order."""

    url: str
    refused: list[Refusal] = field(default_factory=list)
    #: ``(host, port, error)`` of connections that failed (not refused), in order.
    failed: list[tuple[str, int, str]] = field(default_factory=list)

    def failure_for(self, url: str) -> str | None:
        """The connection error of ``url``'s host and port, ``None`` when none was seen."""
        parts = urlsplit(url)
        host = normalise_host(parts.hostname or "")
        port = parts.port or _default_port(parts.scheme)
        return next((e for h, p, e in self.failed if (h, p) == (host, port)), None)

    def refusal_for(self, url: str) -> Refusal | None:
        """The refusal of ``url``'s host and port, else the last refusal, else ``None``."""
        parts = urlsplit(url)
        host = normalise_host(parts.hostname or "")
        for r in self.refused:
            if r.host == host and r.port == (parts.port or _default_port(parts.scheme)):
                return r
        return self.refused[-1] if self.refused else None


def _default_port(scheme: str) -> int:
    return 443 if scheme.lower() in ("https", "wss") else 80


class _Refused(Exception):
    pass


class _Unreachable(Exception):
    """The server could not be reached; ``str(exc)`` is Chromium's name for the error."""


def _net_error(exc: BaseException) -> str:
    if exc.__cause__ is not None and not isinstance(exc, TimeoutError | socket.gaierror):
        exc = exc.__cause__  # anyio's "All connection attempts failed" wraps the last error
    if isinstance(exc, ConnectionRefusedError):
        return "net::ERR_CONNECTION_REFUSED"
    if isinstance(exc, TimeoutError):
        return "net::ERR_CONNECTION_TIMED_OUT"
    if isinstance(exc, socket.gaierror):
        return "net::ERR_NAME_NOT_RESOLVED"
    return f"net::ERR_CONNECTION_FAILED ({exc})"


class _Proxy:
    def __init__(self, rules: Destinations, state: Guard) -> None:
        self.rules = rules
        self.state = state

    async def connect(self, host: str, port: int) -> anyio.abc.SocketStream:
        """A connection to the first allowed address of ``host``.

        :raises _Refused: no address is allowed (recorded).
        :raises OSError: resolving or connecting failed.
        """
        host = normalise_host(host)

        async def to(address: IPAddress) -> anyio.abc.SocketStream:
            with anyio.fail_after(_CONNECT_S):
                return await anyio.connect_tcp(str(address), port)

        try:
            return await connect_checked(self.rules, host, port, to, resolve_timeout_s=_CONNECT_S)
        except Refused as exc:
            self.state.refused.append(Refusal(host, port, exc.reason))
            log.info("web_worker: refused %s", exc.reason)
            raise _Refused(exc.reason) from None
        except (OSError, TimeoutError) as exc:
            raise self._unreachable(host, port, exc) from None

    def _unreachable(self, host: str, port: int, exc: BaseException) -> _Unreachable:
        name = _net_error(exc)
        self.state.failed.append((host, port, name))
        return _Unreachable(name)

    async def handle(self, client: anyio.abc.SocketStream) -> None:
        """Serve one client connection; never raises (a failure closes the connection)."""
        try:
            await self._handle(client)
        except Exception as exc:  # one broken connection must not stop the proxy
            log.warning("web_worker: proxy connection failed: %r", exc)

    async def _handle(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            try:
                head = await reader.receive_until(b"\r\n\r\n", _MAX_HEAD)
            except (anyio.IncompleteRead, anyio.DelimiterNotFound, OSError):
                return
            line, _, rest = head.partition(b"\r\n")
            parts = line.split(b" ")
            if len(parts) != 3:
                await _answer(client, 400, "Bad Request")
                return
            method, target, version = parts
            try:
                if method == b"CONNECT":
                    await self._tunnel(client, reader, target.decode("latin-1"))
                else:
                    await self._forward(client, reader, method, target, version, rest)
            except _Refused as exc:
                await _answer(client, 403, "Forbidden", (REFUSED_HEADER, str(exc)))
            except _Unreachable as exc:
                await _answer(client, 502, "Bad Gateway", (UPSTREAM_ERROR_HEADER, str(exc)))

    async def _tunnel(
        self, client: anyio.abc.SocketStream, reader: BufferedByteReceiveStream, target: str
    ) -> None:
        parts = urlsplit(f"//{target}")
        try:
            host, port = parts.hostname or "", parts.port or 443
        except ValueError:
            await _answer(client, 400, "Bad Request")
            return
        upstream = await self.connect(host, port)
        async with upstream:
            await client.send(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pipe, reader, upstream, tg.cancel_scope)
                tg.start_soon(_pipe, upstream, client, tg.cancel_scope)

    async def _forward(
        self,
        client: anyio.abc.SocketStream,
        reader: BufferedByteReceiveStream,
        method: bytes,
        target: bytes,
        version: bytes,
        rest: bytes,
    ) -> None:
        url = urlsplit(target.decode("latin-1"))
        if url.scheme.lower() != "http" or not url.hostname:
            await _answer(client, 400, "Bad Request")
            return
        try:
            port = url.port or 80
        except ValueError:
            await _answer(client, 400, "Bad Request")
            return
        upstream = await self.connect(url.hostname, port)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        head = b" ".join((method, path.encode("latin-1"), version)) + b"\r\n"
        head += _without_hop_headers(rest) + b"Connection: close\r\n\r\n"
        async with upstream:
            await upstream.send(head)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pipe, reader, upstream, None)  # a request body, if any
                await _relay_response(upstream, client)
                tg.cancel_scope.cancel()


def _without_hop_headers(lines: bytes) -> bytes:
    """Header lines (each ending CRLF) minus the hop-by-hop ones this proxy replaces."""
    out = b""
    for line in lines.split(b"\r\n"):
        if line and line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS:
            out += line + b"\r\n"
    return out


async def _relay_response(upstream: anyio.abc.SocketStream, client: anyio.abc.SocketStream) -> None:
    """The response with its head saying ``Connection: close``, then the body until the
    server closes."""
    reader = BufferedByteReceiveStream(upstream)
    try:
        head = await reader.receive_until(b"\r\n\r\n", _MAX_HEAD)
    except (anyio.IncompleteRead, anyio.DelimiterNotFound):
        return
    status, _, rest = head.partition(b"\r\n")
    await client.send(status + b"\r\n" + _without_hop_headers(rest) + b"Connection: close\r\n\r\n")
    await _pipe(reader, client, None)


async def _pipe(
    source: BufferedByteReceiveStream | anyio.abc.SocketStream,
    sink: anyio.abc.SocketStream,
    done: anyio.CancelScope | None,
) -> None:
    """Copy until ``source`` ends; then cancel ``done`` (a tunnel ends with either side)."""
    try:
        while True:
            data = await source.receive(_CHUNK)
            await sink.send(data)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        if done is not None:
            done.cancel()


async def _answer(
    client: anyio.abc.SocketStream,
    status: int,
    phrase: str,
    header: tuple[str, str] | None = None,
) -> None:
    text = (header[1] if header else phrase).encode()
    head = f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\n"
    if header is not None:
        head += f"{header[0]}: {header[1]}\r\n"
    head += f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n"
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await client.send(head.encode("latin-1", "replace") + text)


@contextlib.asynccontextmanager
async def guard(rules: Destinations) -> AsyncIterator[Guard]:
    """A proxy for the ``with`` block (module docstring), stopped with every connection it
    holds on exit."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    state = Guard(f"http://127.0.0.1:{port}")
    proxy = _Proxy(rules, state)
    try:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, proxy.handle)
            try:
                yield state
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # Only the block's own exception can be in it (the proxy's tasks never raise): the
        # caller sees that exception, not a group.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
