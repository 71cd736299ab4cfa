"""The checked connection of webhook deliveries (telha.webhooks.checked_transport over
workers_common.checked_connect; docs/operations.md, "Webhooks") against real sockets on
127.0.0.1: what is checked is the address connected to, a refused destination is never
connected to, ``Host`` keeps the URL's name, and ``host:port`` / CIDR entries mean what they
mean for ``[web]``."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from telha.webhooks.checked_transport import CheckedTransport
from tests.support.receiver import Receiver
from workers_common.checked_connect import Refused
from workers_common.destinations import Destinations

pytestmark = pytest.mark.anyio

LIMITS = httpx.Limits(max_connections=1, max_keepalive_connections=1)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture
def trap() -> Iterator[socket.socket]:
    """A listening socket nothing may connect to (a completed handshake waits in its
    backlog, so :func:`_connections` sees it without any accept loop)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s


def _connections(trap: socket.socket) -> int:
    trap.setblocking(False)
    n = 0
    while True:
        try:
            conn, _ = trap.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


def _rules(*hosts: str, deny_private: bool = True) -> Destinations:
    return Destinations.from_config(hosts, deny_private, "[webhooks]")


async def _post(rules: Destinations, url: str) -> int:
    async with CheckedTransport(rules, limits=LIMITS) as transport:
        request = httpx.Request("POST", url, content=b"{}")
        resp = await transport.handle_async_request(request)
        await resp.aread()
        await resp.aclose()
        return resp.status_code


async def test_listed_address_and_port(receiver: Receiver) -> None:
    assert await _post(_rules(f"127.0.0.1:{receiver.port}"), receiver.url("/a")) == 200
    [got] = receiver.deliveries("/a")
    assert got.headers["host"] == f"127.0.0.1:{receiver.port}"


async def test_a_name_connects_to_its_checked_address_and_keeps_its_host(
    receiver: Receiver,
) -> None:
    # The address entry allows what localhost resolves to; the request still names it.
    url = f"http://localhost:{receiver.port}/named"
    assert await _post(_rules(f"127.0.0.1:{receiver.port}"), url) == 200
    [got] = receiver.deliveries("/named")
    assert got.headers["host"] == f"localhost:{receiver.port}"


async def test_cidr_entry_admits_any_port_in_it(receiver: Receiver) -> None:
    assert await _post(_rules("127.0.0.0/8"), receiver.url("/cidr")) == 200


@pytest.mark.parametrize(
    ("hosts", "host", "reason"),
    [
        ((), "localhost", "loopback address"),  # the default: private denied
        ((), "127.0.0.1", "loopback address"),
        (("localhost:{port}",), "localhost", "loopback address"),  # a name, not its address
        (("127.0.0.1:1",), "127.0.0.1", "not on [webhooks] allowed_hosts"),  # another port
        (("10.0.0.0/8",), "localhost", "not on [webhooks] allowed_hosts"),
    ],
)
async def test_refused_destinations_are_never_connected_to(
    trap: socket.socket, hosts: tuple[str, ...], host: str, reason: str
) -> None:
    port = trap.getsockname()[1]
    rules = _rules(*(h.format(port=port) for h in hosts))
    with pytest.raises(Refused) as refused:
        await _post(rules, f"http://{host}:{port}/x")
    assert reason in refused.value.reason and str(port) in refused.value.reason
    assert _connections(trap) == 0


async def test_deny_private_off_allows_loopback(receiver: Receiver) -> None:
    assert await _post(_rules(deny_private=False), receiver.url("/open")) == 200


async def test_an_allowed_address_that_refuses_is_a_connect_error() -> None:
    # A closed port on loopback: the OS error becomes httpx's ConnectError (a retry), never
    # a Refused (permanent). No name is resolved: tests make no DNS query.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        await _post(_rules(deny_private=False), f"http://127.0.0.1:{port}/")
