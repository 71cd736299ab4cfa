"""GET through Playwright's HTTP client (``APIRequestContext``, made with the fetch's proxy,
:mod:`web_worker.proxy`, which checks every connection's address) with redirects followed by
hand, so that each hop is also prechecked (an address literal, a host off the allow-list) and
a hop the proxy refused is told apart from a server's 403. Used for downloads and robots.txt.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urljoin

from playwright.async_api import APIRequestContext, APIResponse

from web_worker.proxy import REFUSED_HEADER

__all__ = ["HostNotAllowed", "TooManyRedirects", "get"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class HostNotAllowed(Exception):
    """A hop is refused (``str(exc)`` says which address and why)."""


class TooManyRedirects(Exception):
    """More than ``max_redirects`` hops (``str(exc)`` is the last URL)."""


async def get(
    api: APIRequestContext,
    url: str,
    *,
    refusal: Callable[[str], str | None],
    max_redirects: int,
    timeout_s: float,
) -> APIResponse:
    """The response at the end of ``url``'s redirects (the caller disposes it); statuses are
    not errors here.

    :raises HostNotAllowed: a hop is refused, before it is requested or by the proxy.
    :raises TooManyRedirects: more than ``max_redirects`` hops.
    :raises playwright.async_api.Error: the request itself failed (network, timeout).
    """
    for _hop in range(max_redirects + 1):
        why = refusal(url)
        if why is not None:
            raise HostNotAllowed(why)
        response = await api.get(
            url, max_redirects=0, timeout=timeout_s * 1000, fail_on_status_code=False
        )
        refused = response.headers.get(REFUSED_HEADER)
        if refused is not None:
            await response.dispose()
            raise HostNotAllowed(refused)
        location = response.headers.get("location")
        if response.status not in _REDIRECTS or not location:
            return response
        await response.dispose()
        url = urljoin(url, location)
    raise TooManyRedirects(url)
