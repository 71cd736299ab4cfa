"""Where the service may connect on a tenant's behalf: the one destination rule of web fetches
(``[web]``) and webhook deliveries (``[webhooks]``) (docs/formats.md, "Web pages:
destinations"; docs/operations.md, "Webhooks"); pure, no I/O.

Every such connection goes through :func:`workers_common.checked_connect.connect_checked`,
which resolves the host once, checks each address here with :meth:`Destinations.check` and
connects to that exact address, so a name cannot resolve to something else between the check
and the connect. Each section has its own :class:`Destinations` (its refusals name it).

Rules, in order:

1. ``allowed_hosts`` not empty: the connection must match an entry. An entry is a host
   name (``example.org``: that name, any port), a name with a port (``example.org:8080``), an
   address (``127.0.0.1``, ``::1``; any port), an address with a port (``127.0.0.1:8000``,
   ``[::1]:8000``) or a network (``10.0.0.0/8``, any port). Anything else is refused
   (``not on [web] allowed_hosts``).
2. ``deny_private`` (default true): an address that is not public — loopback, RFC 1918,
   link-local (169.254.169.254 included), CGNAT (100.64/10), unspecified, multicast,
   broadcast and reserved IPv4; IPv6 loopback, unspecified, ULA, link-local, multicast and
   IPv4-mapped — is refused unless an *address* or *network* entry lists it: a host name
   entry allows the name, not a private address it resolves to.

Host spellings are normalised first as browsers do (:mod:`workers_common.hosts`): IPv4 in
any of the WHATWG URL forms (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``), IPv6
in brackets or not, lower case, trailing dots dropped.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from workers_common.hosts import IPAddress, Target, as_address, normalise_host, parse_url

__all__ = [
    "Destinations",
    "Entry",
    "IPAddress",
    "bare_entries",
    "normalise_host",
    "parse_entry",
    "private_kind",
]

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
    address = as_address(name)
    if address is not None:
        return Entry(None, ipaddress.ip_network(address), port)
    return Entry(name, None, port)


def bare_entries(allowed_hosts: Iterable[str]) -> list[str]:
    """The entries of ``allowed_hosts`` that name a host or an address without a port (each
    admits every port of it; ``telha serve`` warns about them). Networks are not listed."""
    out = []
    for text in allowed_hosts:
        try:
            entry = parse_entry(text) if text.strip() else None
        except ValueError:
            continue
        if entry is not None and entry.port is None and "/" not in text:
            out.append(text.strip())
    return out


@dataclass(frozen=True, slots=True)
class Destinations:
    """One section's destination rules (module docstring).

    :ivar entries: ``allowed_hosts`` parsed; empty: any public destination.
    :ivar deny_private: ``deny_private``.
    :ivar section: the config section refusals name (``"[web]"``, ``"[webhooks]"``).
    """

    entries: tuple[Entry, ...] = ()
    deny_private: bool = True
    section: str = "[web]"

    @classmethod
    def from_config(
        cls, allowed_hosts: Iterable[str], deny_private: bool, section: str = "[web]"
    ) -> Destinations:
        """From the config's strings.

        :raises ValueError: an entry :func:`parse_entry` refuses (the message names it).
        """
        entries = tuple(parse_entry(h) for h in allowed_hosts if h.strip())
        return cls(entries, deny_private, section)

    def check(self, host: str, address: IPAddress, port: int) -> str | None:
        """Why a connection to ``address``:``port`` (asked for as ``host``) is refused, or
        ``None`` when it is allowed. ``host`` may be in any spelling."""
        host = normalise_host(host)
        where = _where(host, address, port)
        matched = [e for e in self.entries if e.matches(host, address, port)]
        if self.entries and not matched:
            return f"{where} is not on {self.section} allowed_hosts"
        if not self.deny_private:
            return None
        kind = private_kind(address)
        if kind is None or any(e.names_address for e in matched):
            return None
        return (
            f"{where} is a {kind} address; list it in {self.section} allowed_hosts"
            " (as an address or network) to allow it"
        )

    def check_host(self, host: str, port: int) -> str | None:
        """Why a connection to ``host``:``port`` is refused before anything is resolved (an
        address literal refused by :meth:`check`, a name no entry could allow), ``None``
        when it may be tried (a name is checked again, resolved, at connect time)."""
        host = normalise_host(host)
        address = as_address(host)
        if address is not None:
            return self.check(host, address, port)
        # A name is allowed by a name entry, or by the address it resolves to (only
        # connecting can tell): refused here only when no entry could allow it.
        named = any(e.name == host and e.port in (None, port) for e in self.entries)
        if self.entries and not named and not any(e.names_address for e in self.entries):
            return f"{host}:{port} is not on {self.section} allowed_hosts"
        return None

    def check_target(self, target: Target) -> str | None:
        """:meth:`check_host` of a strictly parsed URL
        (:func:`workers_common.hosts.parse_url`)."""
        return self.check_host(target.host, target.port)

    def check_url(
        self, url: str, schemes: tuple[str, ...] = ("http", "https")
    ) -> tuple[str, str | None]:
        """``url`` read strictly (:func:`workers_common.hosts.parse_url`, its host in one
        spelling) and :meth:`check_target`'s refusal (``None``: it may be tried).

        :raises ValueError: a URL a browser could not parse, or another scheme.
        """
        target = parse_url(url, schemes)
        return target.url, self.check_target(target)

    def precheck(self, url: str) -> str | None:
        """Why ``url`` is refused before anything is resolved (:meth:`check_host`), or
        ``None`` when it may be fetched. Non-network schemes are not refused; a spelling
        :func:`normalise_host` cannot read is left to the connection."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https", "ws", "wss"):
            return None
        try:
            port = parts.port or (443 if scheme in ("https", "wss") else 80)
        except ValueError:
            return f"{url} has a bad port"
        return self.check_host(parts.hostname or "", port)


def _where(host: str, address: IPAddress, port: int) -> str:
    shown = f"[{address}]" if address.version == 6 else str(address)
    if host in (str(address), ""):
        return f"{shown}:{port}"
    return f"{host}:{port} ({shown})"
