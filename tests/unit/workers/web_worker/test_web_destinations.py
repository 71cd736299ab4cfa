"""The destination rules (workers_common.destinations, shared with webhooks) and the web
worker's checking proxy (web_worker.proxy) spoken to directly on 127.0.0.1: spellings,
entries, every refused category, CONNECT and absolute-URI requests with odd host
spellings."""

from __future__ import annotations

import ipaddress
import socket

import anyio
import pytest

from tests.support.site import serve_site
from web_worker.proxy import guard
from workers_common.destinations import Destinations, normalise_host, parse_entry, private_kind


@pytest.mark.parametrize(
    ("spelling", "normal"),
    [
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("Site.LOCALHOST.", "site.localhost"),
        ("169.254.43518", "169.254.169.254"),
        ("1.2.3.4.5", "1.2.3.4.5"),  # not an address: a (bad) name
        ("08.1.1.1", "08.1.1.1"),  # 8 is not an octal digit: a name
    ],
)
def test_normalise_host(spelling: str, normal: str) -> None:
    assert normalise_host(spelling) == normal


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private (RFC 1918)"),
        ("172.16.0.1", "private (RFC 1918)"),
        ("192.168.1.1", "private (RFC 1918)"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "CGNAT"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00::1", "unique local (ULA)"),
        ("fe80::1", "link-local"),
        ("::ffff:8.8.8.8", "IPv4-mapped"),
        ("192.0.2.1", "not public"),  # documentation range
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
    ],
)
def test_private_kinds(address: str, kind: str | None) -> None:
    assert private_kind(ipaddress.ip_address(address)) == kind


def test_entries_parse_and_bad_ones_say_why() -> None:
    assert parse_entry("Site.localhost").name == "site.localhost"
    assert parse_entry("site.localhost:8080").port == 8080
    assert str(parse_entry("[::1]:8000").network) == "::1/128"
    assert str(parse_entry("127.1:8000").network) == "127.0.0.1/32"
    assert str(parse_entry("10.0.0.0/8").network) == "10.0.0.0/8"
    for bad, why in (("127.0.0.1:0", "1-65535"), ("a:b", "number"), ("[::1]x", "port"),
                     ("10.0.0.0/99", "10.0.0.0/99")):  # fmt: skip
        with pytest.raises(ValueError, match=why):
            parse_entry(bad)


def test_check_rules() -> None:
    loop = ipaddress.ip_address("127.0.0.1")
    public = ipaddress.ip_address("93.184.216.34")
    default = Destinations()
    assert default.check("site.localhost", public, 443) is None
    assert "loopback" in str(default.check("localhost", loop, 80))
    assert "link-local" in str(
        default.check("metadata", ipaddress.ip_address("169.254.169.254"), 80)
    )
    listed = Destinations.from_config(["127.0.0.1:8000", "intranet.localhost", "10.0.0.0/8"], True)
    assert listed.check("127.0.0.1", loop, 8000) is None
    assert "not on [web] allowed_hosts" in str(listed.check("127.0.0.1", loop, 8001))
    assert "not on [web] allowed_hosts" in str(listed.check("site.localhost", public, 443))
    assert listed.check("x", ipaddress.ip_address("10.9.9.9"), 22) is None  # the network
    # A name entry allows the name, not a private address it resolves to.
    private = ipaddress.ip_address("192.168.0.5")
    assert "private" in str(listed.check("intranet.localhost", private, 80))
    assert listed.check("intranet.localhost", public, 80) is None
    # An IPv4-mapped spelling of a listed address is that address.
    assert listed.check("x", ipaddress.ip_address("::ffff:127.0.0.1"), 8000) is None
    intranet = Destinations.from_config([], False)
    assert intranet.check("localhost", loop, 80) is None


def test_precheck_reads_every_spelling() -> None:
    rules = Destinations()
    for host in ("127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "127.0.0.1.",
                 "[::1]", "0.0.0.0"):  # fmt: skip
        assert rules.precheck(f"http://{host}:8080/admin") is not None, host
    assert rules.precheck("http://site.localhost/") is None  # decided when connecting
    assert rules.precheck("data:text/html,x") is None
    listed = Destinations.from_config(["site.localhost"], True)
    assert "not on" in str(listed.precheck("http://other.localhost/"))
    assert listed.precheck("https://site.localhost/x") is None


async def _ask(port: int, request: bytes) -> bytes:
    async with await anyio.connect_tcp("127.0.0.1", port) as s:
        await s.send(request)
        out = b""
        with anyio.move_on_after(10):
            try:
                while True:
                    out += await s.receive()
            except anyio.EndOfStream:
                pass
        return out


@pytest.mark.anyio
async def test_proxy_checks_the_connected_address() -> None:
    with serve_site() as site, serve_site() as internal:
        site.page("/ok.html", "<p>fine</p>")
        internal.page("/admin", "SECRET")
        listed = site.base.removeprefix("http://")
        iport = internal.base.rsplit(":", 1)[1]
        async with guard(Destinations.from_config([listed], True)) as proxy:
            port = int(proxy.url.rsplit(":", 1)[1])
            ok = await _ask(
                port, f"GET {site.url('/ok.html')} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            )
            assert ok.startswith(b"HTTP/1.0 200") or ok.startswith(b"HTTP/1.1 200"), ok[:80]
            assert b"Connection: close" in ok and ok.endswith(b"<p>fine</p>")
            for host in ("127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "localhost",
                         "127.0.0.1."):  # fmt: skip
                answer = await _ask(
                    port, f"GET http://{host}:{iport}/admin HTTP/1.1\r\n\r\n".encode()
                )
                assert answer.startswith(b"HTTP/1.1 403"), (host, answer[:80])
                assert b"x-telha-refused: " in answer.lower()
                tunnel = await _ask(port, f"CONNECT {host}:{iport} HTTP/1.1\r\n\r\n".encode())
                assert tunnel.startswith(b"HTTP/1.1 403"), (host, tunnel[:80])
            assert len(proxy.refused) == 12
            assert all(f":{iport}" in r.reason for r in proxy.refused)
        async with guard(Destinations.from_config(["127.0.0.1"], True)) as proxy:
            port = int(proxy.url.rsplit(":", 1)[1])
            with socket.socket() as unused:
                unused.bind(("127.0.0.1", 0))
                gone = unused.getsockname()[1]
            closed = await _ask(port, f"GET http://127.0.0.1:{gone}/x HTTP/1.1\r\n\r\n".encode())
            assert closed.startswith(b"HTTP/1.1 502")
            assert b"net::ERR_CONNECTION_REFUSED" in closed
            assert proxy.failure_for(f"http://127.0.0.1:{gone}/") == "net::ERR_CONNECTION_REFUSED"
        assert internal.hits == []
