"""httpx transports whose every connection is checked against a section's destination rules
(docs/operations.md, "Webhooks"): the webhook deliverer's POSTs connect through
:func:`workers_common.checked_connect.connect_checked`, like the web worker's proxy.

:class:`CheckedBackend` is an httpcore network backend wrapping httpcore's anyio backend: its
``connect_tcp`` resolves the host once, checks each address and connects to exactly an
allowed one; TLS still names the URL's host (httpcore passes ``server_hostname`` from the
request's origin, not from the address connected to), and so does ``Host``. A refused
destination raises :class:`~workers_common.checked_connect.Refused` out of
``handle_async_request`` (httpx maps only httpcore's own errors, so it is not wrapped).
"""

from __future__ import annotations

from collections.abc import Iterable

import httpcore
import httpx

from workers_common.checked_connect import connect_checked
from workers_common.destinations import Destinations
from workers_common.hosts import IPAddress

__all__ = ["CheckedBackend", "CheckedTransport"]


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend with every TCP connection checked by ``rules`` (module
    docstring). Unix sockets are refused (a destination is always host and port)."""

    def __init__(self, rules: Destinations) -> None:
        self._rules = rules
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """A connection to the first allowed address of ``host`` that answers.

        :raises workers_common.checked_connect.Refused: no address of ``host`` is allowed.
        :raises httpcore.ConnectError: the name does not resolve or no allowed address
            answers; :raises httpcore.ConnectTimeout: resolving or connecting took longer
            than ``timeout`` seconds.
        """

        async def to(address: IPAddress) -> httpcore.AsyncNetworkStream:
            return await self._inner.connect_tcp(
                str(address), port, timeout, local_address, socket_options
            )

        try:
            return await connect_checked(self._rules, host, port, to, resolve_timeout_s=timeout)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "resolving timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"{host}:{port}: {exc}") from exc

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Never: a webhook's destination is a host and a port.

        :raises httpcore.ConnectError: always.
        """
        raise httpcore.ConnectError("unix sockets are not a destination")

    async def sleep(self, seconds: float) -> None:
        """See :meth:`httpcore.AsyncNetworkBackend.sleep`."""
        await self._inner.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport (no proxy, TLS verified as httpx does by default) whose connection
    pool connects through :class:`CheckedBackend`.

    httpx 0.28's transport takes no network backend, so the pool it builds is replaced by
    one built with the same settings and this backend (its only use of ``_pool``).

    :param rules: the destination rules every connection is checked with.
    :param limits: the pool's connection limits.
    """

    def __init__(self, rules: Destinations, *, limits: httpx.Limits) -> None:
        super().__init__(limits=limits)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=CheckedBackend(rules),
        )
