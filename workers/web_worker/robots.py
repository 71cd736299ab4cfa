"""robots.txt for crawl fan-out (docs/formats.md, "Web pages"), read with the standard library's
``urllib.robotparser`` and fetched with Playwright's HTTP client (``APIRequestContext``: the
process's Playwright, no browser page) through a proxy of its own that checks the address it
connects to, as every request of the worker (:mod:`web_worker.proxy`).

Which links it governs: the links a crawl would follow (child jobs). A URL submitted directly
is fetched as asked, like a browser would.

Rules (RFC 9309 §2.3.1): 2xx → the file's rules for user agent :data:`ROBOTS_AGENT` (else
``*``); a 4xx (no robots.txt) → everything allowed; a 5xx, a network failure, a refused
destination (:mod:`workers_common.destinations`) or more than 5 redirects → nothing allowed, for
this fan-out. Answers are cached per origin for :data:`CACHE_S` seconds in the worker
process; a ``Crawl-delay`` raises the origin's polite delay (for jobs after the one that
fetched it).
"""

from __future__ import annotations

import time
import urllib.robotparser
from dataclasses import dataclass

from playwright.async_api import APIRequestContext, Playwright
from playwright.async_api import Error as PlaywrightError

from web_worker import requests
from web_worker.browser import WebSettings
from web_worker.proxy import guard

__all__ = ["CACHE_S", "ROBOTS_AGENT", "Robots", "RobotsCache"]

#: The product token matched against ``User-agent`` lines.
ROBOTS_AGENT = "Telha"
#: Seconds a fetched robots.txt is trusted.
CACHE_S = 3600.0
_TIMEOUT_S = 10.0
_MAX_BYTES = 512 * 1024  # RFC 9309 §2.5: at least 500 KiB must be parsed


@dataclass(frozen=True, slots=True)
class Robots:
    """One origin's answer: a parser, or allow/deny everything."""

    parser: urllib.robotparser.RobotFileParser | None
    allow_all: bool

    def allows(self, url: str) -> bool:
        """Whether :data:`ROBOTS_AGENT` may fetch ``url``."""
        if self.parser is None:
            return self.allow_all
        return self.parser.can_fetch(ROBOTS_AGENT, url)

    def crawl_delay_s(self) -> float:
        """The file's ``Crawl-delay`` for us, 0 when none."""
        if self.parser is None:
            return 0.0
        delay = self.parser.crawl_delay(ROBOTS_AGENT)
        return float(delay) if delay is not None else 0.0


def parse_robots(text: str) -> Robots:
    """A :class:`Robots` from robots.txt content."""
    parser = urllib.robotparser.RobotFileParser()
    parser.parse(text.splitlines())
    return Robots(parser, True)


class RobotsCache:
    """robots.txt per origin, fetched on first need and kept for :data:`CACHE_S`."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[float, Robots]] = {}

    def cached(self, origin: str) -> Robots | None:
        """The cached answer for ``origin`` if still fresh, else ``None`` (no fetch)."""
        hit = self._cache.get(origin)
        if hit is not None and time.monotonic() - hit[0] < CACHE_S:
            return hit[1]
        return None

    async def get(self, playwright: Playwright, origin: str, settings: WebSettings) -> Robots:
        """The rules of ``origin`` (``scheme://host[:port]``); never raises for the file's
        absence or a failed fetch (see the module docstring). Redirects (at most 5, RFC 9309)
        are followed only to destinations ``settings`` allows."""
        now = time.monotonic()
        hit = self._cache.get(origin)
        if hit is not None and now - hit[0] < CACHE_S:
            return hit[1]
        robots = await self._fetch(playwright, origin, settings)
        self._cache[origin] = (now, robots)
        return robots

    async def _fetch(self, playwright: Playwright, origin: str, settings: WebSettings) -> Robots:
        async with guard(settings.destinations) as proxy:
            api = await playwright.request.new_context(proxy={"server": proxy.url})
            try:
                return await self._read(api, origin, settings)
            finally:
                await api.dispose()

    @staticmethod
    async def _read(api: APIRequestContext, origin: str, settings: WebSettings) -> Robots:
        try:
            response = await requests.get(
                api,
                f"{origin}/robots.txt",
                refusal=settings.refusal,
                max_redirects=5,
                timeout_s=_TIMEOUT_S,
            )
            try:
                if 400 <= response.status < 500:
                    return Robots(None, True)
                if not 200 <= response.status < 300:
                    return Robots(None, False)
                body = (await response.body())[:_MAX_BYTES]
            finally:
                await response.dispose()
            return parse_robots(body.decode("utf-8", "replace"))
        except (PlaywrightError, requests.HostNotAllowed, requests.TooManyRedirects):
            return Robots(None, False)
