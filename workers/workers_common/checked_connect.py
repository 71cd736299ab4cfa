"""The one checked connection of everything the service connects to on a tenant's behalf:
the web worker's proxy (:mod:`web_worker.proxy`) and webhook deliveries
(:mod:`telha.webhooks.checked_transport`) (docs/formats.md, "Web pages: destinations";
docs/operations.md, "Webhooks").

:func:`connect_checked` resolves the host once, checks every address with
:meth:`workers_common.destinations.Destinations.check` and connects to exactly an allowed
address (the caller's ``connect`` is given the address, never the name), so a name cannot
resolve to something else between the check and the connect. An address literal is not
resolved: its check is the only cost.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from workers_common.destinations import Destinations
from workers_common.hosts import IPAddress, normalise_host

__all__ = ["Refused", "connect_checked", "resolve"]

T = TypeVar("T")


class Refused(Exception):
    """No address of the destination is allowed; ``reason`` names the address and the rule
    (``"127.0.0.1:9 is a loopback address; list it in [webhooks] allowed_hosts …"``)."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(reason)
        self.host = host
        self.port = port
        self.reason = reason


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses of ``host`` (normalised) in resolver order, without repeats; an address
    literal is itself (nothing is resolved).

    :raises OSError: the name does not resolve (``socket.gaierror``).
    """
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in out:
            out.append(address)
    return out


async def connect_checked(
    rules: Destinations,
    host: str,
    port: int,
    connect: Callable[[IPAddress], Awaitable[T]],
    *,
    resolve_timeout_s: float | None,
) -> T:
    """``connect(address)`` for the first allowed address of ``host`` that answers, trying
    the allowed ones in resolver order (module docstring).

    :param host: any spelling (normalised here).
    :param connect: opens the connection to one address (it is given nothing else).
    :param resolve_timeout_s: bound on resolving, seconds (``None``: none).
    :raises Refused: no address of ``host`` is allowed (checked before any connect).
    :raises OSError: resolving failed (``socket.gaierror``), or every allowed address failed
        (the last error).
    :raises TimeoutError: resolving took longer than ``resolve_timeout_s``; or ``connect``'s
        own timeout.
    """
    host = normalise_host(host)
    with anyio.fail_after(resolve_timeout_s):
        addresses = await resolve(host, port)
    reasons = [rules.check(host, a, port) for a in addresses]
    allowed = [a for a, why in zip(addresses, reasons, strict=True) if why is None]
    if not allowed:
        raise Refused(
            host, port, next((r for r in reasons if r), f"{host}:{port} does not resolve")
        )
    error: BaseException | None = None
    for address in allowed:
        try:
            return await connect(address)
        except (OSError, TimeoutError) as exc:
            error = exc
    assert error is not None
    raise error
