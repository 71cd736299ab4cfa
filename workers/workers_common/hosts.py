"""Host names and URLs read as a browser reads them (the WHATWG URL standard's host parser;
docs/formats.md, "Web pages: destinations"); pure, no I/O.

:func:`normalise_host` gives one spelling per host and never fails (the web worker reads
what Chromium asks for with it). :func:`parse_url` is the strict reading of a URL a tenant
gives (a webhook's ``url``): a URL a browser could not parse is refused, not guessed at:

- an IPv4 address in any WHATWG spelling (``127.1``, ``2130706433``, ``0x7f000001``,
  ``0177.0.0.1``) becomes dotted decimal; a host whose last label is a number but is not a
  valid address (``256.0.0.1``) is an error, as in a browser;
- an IPv6 address (brackets required) is compressed; a zone id is an error;
- a name is percent-decoded, mapped by UTS #46 (lower case, full-width forms to ASCII:
  ``ｅｘａｍｐｌｅ．ｃｏｍ`` is ``example.com``) and written in ASCII (punycode); an
  invalid ``xn--`` label, a label IDNA refuses or a forbidden character is an error;
- the port must be 1-65535.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import idna

__all__ = ["IPAddress", "Target", "as_address", "normalise_host", "parse_host", "parse_url"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Characters no host may hold (WHATWG "forbidden domain code point", less ``%``, which is
#: decoded first).
_FORBIDDEN = frozenset(" #/:<>?@[\\]^|%") | frozenset(chr(c) for c in (*range(0x20), 0x7F))
#: What no URL given to the service may hold: whitespace (Unicode's too) and controls.
_BLANK_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")
#: Distinct host spellings remembered by the pure, hot readers below (each a few µs).
_CACHED_HOSTS = 4096


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


def _ends_in_number(host: str) -> bool:
    """WHATWG "ends in a number": the last label (one trailing dot ignored) is all digits or
    ``0x`` and hex digits, so the host must be an IPv4 address."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    if last and last.isascii() and last.isdigit():
        return True
    if last[:2].lower() != "0x":
        return False
    digits = last[2:]
    return all(c in "0123456789abcdefABCDEF" for c in digits)


@functools.lru_cache(maxsize=_CACHED_HOSTS)
def normalise_host(host: str) -> str:
    """One spelling per host: lower case, brackets and trailing dots dropped, an IPv4 address
    in any browser spelling as dotted decimal, an IPv6 address compressed (an IPv4-mapped one
    stays IPv6: ``::ffff:7f00:1``). Never raises: a spelling it cannot read is returned
    lower-cased (:func:`parse_host` is the strict reading)."""
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


def as_address(host: str) -> IPAddress | None:
    """``host`` (normalised) as an address, ``None`` for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@functools.lru_cache(maxsize=_CACHED_HOSTS)
def parse_host(raw: str) -> str:
    """The one ASCII spelling of URL host ``raw`` (module docstring): dotted-decimal IPv4,
    compressed IPv6 without brackets, or a lower-case ASCII name without a trailing dot.

    :raises ValueError: a host a browser could not parse (the message says why).
    """
    if raw.startswith("["):
        inner = raw[1:-1] if raw.endswith("]") else ""
        if not inner or "%" in inner:
            raise ValueError(f"host {raw!r} is not a valid IPv6 address")
        try:
            return str(ipaddress.IPv6Address(inner))
        except ValueError:
            raise ValueError(f"host {raw!r} is not a valid IPv6 address") from None
    try:
        decoded = unquote(raw, errors="strict")
        mapped = idna.uts46_remap(decoded, std3_rules=False, transitional=False)
        labels = [
            idna.alabel(label).decode("ascii") if not label.isascii() else label
            for label in mapped.split(".")
        ]
        for label in labels:
            if label.startswith("xn--"):
                idna.ulabel(label)
    except (UnicodeError, ValueError) as exc:
        raise ValueError(f"host {raw!r} is not a valid host name ({exc})") from None
    host = ".".join(labels)
    if not host.strip("."):
        raise ValueError("the URL has no host")
    if any(c in _FORBIDDEN for c in host):
        raise ValueError(f"host {raw!r} holds a character no host name may hold")
    if _ends_in_number(host):
        v4 = _whatwg_ipv4(host.rstrip(".") if host.endswith(".") else host)
        if v4 is None:
            raise ValueError(f"host {raw!r} is not a valid IPv4 address")
        return str(v4)
    return host.rstrip(".")


@dataclass(frozen=True, slots=True)
class Target:
    """A URL read strictly (:func:`parse_url`).

    :ivar url: the URL with its host in the one spelling (unchanged when it already was).
    :ivar scheme: lower case.
    :ivar host: :func:`parse_host`'s spelling (IPv6 without brackets).
    :ivar port: the URL's port, else the scheme's (80, 443).
    """

    url: str
    scheme: str
    host: str
    port: int


def parse_url(url: str, schemes: tuple[str, ...] = ("http", "https")) -> Target:
    """``url`` read as a browser reads it (module docstring), its scheme one of ``schemes``.

    :raises ValueError: a URL a browser could not parse, another scheme, a bad host or port
        (the message says which, without naming the input field).
    """
    if _BLANK_OR_CONTROL.search(url):
        raise ValueError("the URL holds whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise ValueError(f"must be an {' or '.join(schemes)} URL")
    if "\\" in parts.netloc:
        # A browser reads a backslash as "/" (the host ends there), an HTTP client as part of the
        # authority: the two would not agree on the host.
        raise ValueError("a backslash in the URL's authority")
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if hostport.startswith("["):
        raw_host, _, after = hostport.partition("]")
        raw_host += "]"
        if after and not after.startswith(":"):
            raise ValueError(f"not a valid URL (junk after the host {raw_host!r})")
        raw_port = after[1:]
    else:
        raw_host, _, raw_port = hostport.partition(":")
    if not raw_host:
        raise ValueError("the URL has no host")
    host = parse_host(raw_host)
    default = 443 if scheme == "https" else 80
    if raw_port and not (raw_port.isascii() and raw_port.isdigit()):
        raise ValueError(f"port {raw_port!r} is not a number")
    port = int(raw_port) if raw_port else default
    if not 0 < port < 65536:
        raise ValueError(f"port {raw_port} is not in 1-65535")
    shown = f"[{host}]" if ":" in host else host
    if shown != raw_host:
        netloc = f"{userinfo}{at}{shown}" + (f":{raw_port}" if raw_port else "")
        url = parts._replace(netloc=netloc).geturl()
    return Target(url, scheme, host, port)
