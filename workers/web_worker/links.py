"""URL handling for links and crawl scope; pure, no I/O.

A link's URL is made absolute against the page's base URL (``document.baseURI``: the
``<base href>`` resolved against the final URL after redirects, or the final URL itself), its
fragment removed; only ``http``/``https`` links are kept (``mailto:``, ``javascript:``,
``tel:``, ``data:`` … are not web pages). The scheme and host are lower-cased and a default
port (80/443) dropped, so one page has one spelling.
"""

from __future__ import annotations

import fnmatch
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit

__all__ = ["absolute_url", "matches_any", "origin_of"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def absolute_url(base: str, href: str) -> str | None:
    """``href`` resolved against ``base``, fragment stripped, normalized; ``None`` when it is
    not an ``http``/``https`` URL (or malformed)."""
    href = href.strip()
    if not href:
        return None
    try:
        joined, _fragment = urldefrag(urljoin(base, href))
        parts = urlsplit(joined)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}" if userinfo else host
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL (as :func:`absolute_url` spells it)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    scheme = parts.scheme.lower()
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return f"{scheme}://{host}"


def matches_any(url: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``url`` matches one of the glob ``patterns`` (``fnmatch``, case-sensitive)."""
    return any(fnmatch.fnmatchcase(url, p) for p in patterns)
