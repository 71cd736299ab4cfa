"""GET through Playwright's HTTP client (``APIRequestContext``) with redirects followed by
hand, so that every hop is checked against the allow-list (the client's own redirects would
bypass the browser's request guard). Used for downloads and robots.txt.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urljoin

from playwright.async_api import APIRequestContext, APIResponse

__all__ = ["HostNotAllowed", "TooManyRedirects", "get"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class HostNotAllowed(Exception):
    """A hop's URL is off the allow-list (``str(exc)`` is the URL)."""


class TooManyRedirects(Exception):
    """More than ``max_redirects`` hops (``str(exc)`` is the last URL)."""


async def get(
    api: APIRequestContext,
    url: str,
    *,
    allows: Callable[[str], bool],
    max_redirects: int,
    timeout_s: float,
) -> APIResponse:
    """The response at the end of ``url``'s redirects (the caller disposes it); statuses are
    not errors here.

    :raises HostNotAllowed: a hop is off the allow-list (nothing was requested there).
    :raises TooManyRedirects: more than ``max_redirects`` hops.
    :raises playwright.async_api.Error: the request itself failed (network, timeout).
    """
    for _hop in range(max_redirects + 1):
        if not allows(url):
            raise HostNotAllowed(url)
        response = await api.get(
            url, max_redirects=0, timeout=timeout_s * 1000, fail_on_status_code=False
        )
        location = response.headers.get("location")
        if response.status not in _REDIRECTS or not location:
            return response
        await response.dispose()
        url = urljoin(url, location)
    raise TooManyRedirects(url)
