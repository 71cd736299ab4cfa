"""Where the web worker may connect (docs/formats.md, "Web pages: destinations"); pure, no I/O.

Every connection the worker makes goes through :mod:`web_worker.proxy`, which resolves the
host once, checks each address here with :meth:`Destinations.check` and connects to that
exact address, so a name cannot resolve to something else between the check and the connect.

Rules, in order:

1. ``[web] allowed_hosts`` not empty: the connection must match an entry. An entry is a host
   name (``example.org``: that name, any port), a name with a port (``example.org:8080``), an
   address (``127.0.0.1``, ``::1``; any port), an address with a port (``127.0.0.1:8000``,
   ``[::1]:8000``) or a network (``10.0.0.0/8``). Anything else is refused
   (``not on [web] allowed_hosts``).
2. ``[web] deny_private`` (default true): an address that is not public — loopback, RFC 1918,
   link-local (169.254.169.254 included), CGNAT (100.64/10), unspecified, multicast,
   broadcast and reserved IPv4; IPv6 loopback, unspecified, ULA, link-local, multicast and
   IPv4-mapped — is refused unless an *address* or *network* entry lists it: a host name
   entry allows the name, not a private address it resolves to.

Host spellings are normalised first as browsers do (:func:`normalise_host`): IPv4 in any of
the WHATWG URL forms (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``), IPv6 in
brackets or not, lower case, trailing dots dropped.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Destinations", "Entry", "IPAddress", "normalise_host", "parse_entry", "private_kind"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_V4_KINDS: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private (RFC 1918)"),
    ("100.64.0.0/10", "CGNAT"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private (RFC 1918)"),
    ("192.168.0.0/16", "private (RFC 1918)"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
)
_V6_KINDS: tuple[tuple[str, str], ...] = (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("fc00::/7", "unique local (ULA)"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
)
_KINDS: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), kind) for net, kind in (*_V4_KINDS, *_V6_KINDS)
)


def private_kind(address: IPAddress) -> str | None:
    """What makes ``address`` non-public (``"loopback"``, ``"link-local"`` …), or ``None``
    for a public address. Anything Python's ``ipaddress`` does not call global (documentation
    ranges, 6to4 of a private address …) is ``"not public"``."""
    for net, kind in _KINDS:
        if address.version == net.version and address in net:
            return kind
    return None if address.is_global else "not public"


def _ipv4_part(part: str) -> int | None:
    """One dotted part as the WHATWG URL standard reads it: ``0x`` hex, leading-zero octal,
    else decimal; ``None`` when it is not a number."""
    base = 10
    if part[:2].lower() == "0x":
        part, base = part[2:], 16
        if not part:
            return 0
    elif len(part) > 1 and part.startswith("0"):
        part, base = part[1:], 8
    try:
        return int(part, base) if part.isalnum() and part.isascii() else None
    except ValueError:
        return None


def _whatwg_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read as an IPv4 address the way a browser does (``127.1``, ``2130706433``,
    ``0x7f000001``), ``None`` when it is not one."""
    parts = host.split(".")
    if len(parts) > 4 or not all(parts):
        return None
    numbers = [_ipv4_part(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        return None
    value = values[-1]
    for i, n in enumerate(values[:-1]):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def normalise_host(host: str) -> str:
    """One spelling per host: lower case, brackets and trailing dots dropped, an IPv4 address
    in any browser spelling as dotted decimal, an IPv6 address compressed (an IPv4-mapped one
    stays IPv6: ``::ffff:7f00:1``)."""
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    h = h.rstrip(".")
    if ":" in h:
        try:
            return str(ipaddress.IPv6Address(h))
        except ValueError:
            return h
    v4 = _whatwg_ipv4(h)
    return str(v4) if v4 is not None else h


def _as_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``allowed_hosts`` entry: a host name or an address network (an address is a /32 or
    /128), and a port (``None``: any)."""

    name: str | None
    network: IPNetwork | None
    port: int | None

    def matches(self, host: str, address: IPAddress, port: int) -> bool:
        """Whether a connection to ``address``:``port``, asked for as ``host``, is listed."""
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return self.name == host
        assert self.network is not None
        return any(a.version == self.network.version and a in self.network for a in _forms(address))

    @property
    def names_address(self) -> bool:
        """Whether the entry lists addresses (so it may allow a private one)."""
        return self.network is not None


def _forms(address: IPAddress) -> tuple[IPAddress, ...]:
    """``address`` and, for an IPv4-mapped IPv6 address, the IPv4 address it maps."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return (address, address.ipv4_mapped)
    return (address,)


def parse_entry(text: str) -> Entry:
    """An ``allowed_hosts`` entry (module docstring).

    :raises ValueError: an empty entry, a bad port or a bad network.
    """
    raw = text.strip()
    if not raw:
        raise ValueError("an empty entry")
    if "/" in raw:
        return Entry(None, ipaddress.ip_network(raw.strip("[]"), strict=False), None)
    host, port = raw, None
    if raw.startswith("["):
        inside, _, rest = raw[1:].partition("]")
        host = inside
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                raise ValueError(f"{raw!r}: a port must follow ']:'")
            port = int(rest[1:])
    elif raw.count(":") == 1:
        host, _, digits = raw.partition(":")
        if not digits.isdigit():
            raise ValueError(f"{raw!r}: the port must be a number")
        port = int(digits)
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"{raw!r}: the port must be 1-65535")
    name = normalise_host(host)
    if not name:
        raise ValueError(f"{raw!r}: no host")
    address = _as_address(name)
    if address is not None:
        return Entry(None, ipaddress.ip_network(address), port)
    return Entry(name, None, port)


@dataclass(frozen=True, slots=True)
class Destinations:
    """The process's destination rules (module docstring).

    :ivar entries: ``[web] allowed_hosts`` parsed; empty: any public destination.
    :ivar deny_private: ``[web] deny_private``.
    """

    entries: tuple[Entry, ...] = ()
    deny_private: bool = True

    @classmethod
    def from_config(cls, allowed_hosts: Iterable[str], deny_private: bool) -> Destinations:
        """From the config's strings.

        :raises ValueError: an entry :func:`parse_entry` refuses (the message names it).
        """
        return cls(tuple(parse_entry(h) for h in allowed_hosts if h.strip()), deny_private)

    def check(self, host: str, address: IPAddress, port: int) -> str | None:
        """Why a connection to ``address``:``port`` (asked for as ``host``) is refused, or
        ``None`` when it is allowed. ``host`` may be in any spelling."""
        host = normalise_host(host)
        where = _where(host, address, port)
        matched = [e for e in self.entries if e.matches(host, address, port)]
        if self.entries and not matched:
            return f"{where} is not on [web] allowed_hosts"
        if not self.deny_private:
            return None
        kind = private_kind(address)
        if kind is None or any(e.names_address for e in matched):
            return None
        return (
            f"{where} is a {kind} address; list it in [web] allowed_hosts"
            " (as an address or network) to allow it"
        )

    def precheck(self, url: str) -> str | None:
        """Why ``url`` is refused before anything is resolved (an address literal in any
        spelling, a host off the allow-list), or ``None`` when it may be fetched (a host name
        is checked again, resolved, at connect time). Non-network schemes are not refused."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https", "ws", "wss"):
            return None
        try:
            port = parts.port or (443 if scheme in ("https", "wss") else 80)
        except ValueError:
            return f"{url} has a bad port"
        host = normalise_host(parts.hostname or "")
        address = _as_address(host)
        if address is not None:
            return self.check(host, address, port)
        # A name is allowed by a name entry, or by the address it resolves to (only
        # connecting can tell): refused here only when no entry could allow it.
        named = any(e.name == host and e.port in (None, port) for e in self.entries)
        if self.entries and not named and not any(e.names_address for e in self.entries):
            return f"{host}:{port} is not on [web] allowed_hosts"
        return None


def _where(host: str, address: IPAddress, port: int) -> str:
    shown = f"[{address}]" if address.version == 6 else str(address)
    if host in (str(address), ""):
        return f"{shown}:{port}"
    return f"{host}:{port} ({shown})"
