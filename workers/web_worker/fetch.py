"""Fetching one URL in a fresh browser context (docs/formats.md, "Web pages").

The page is navigated to (``options.wait_until``, default ``load``), redirects followed by the
browser; then ``options.wait_for`` is awaited if given; then the rendered DOM is serialized
(``page.content()``), with the final URL, ``document.baseURI``, the title and the status. A
response that is not HTML (its ``Content-Type`` is neither ``text/html`` nor
``application/xhtml+xml``; or Chromium turns it into a download) is fetched again with the
context's HTTP client and returned as its raw bytes instead, for re-routing (the page would
hold Chromium's viewer, not the bytes served). Everything is bounded by ``options.timeout_s``;
failures are mapped by :mod:`web_worker.status`.

Every request of the fetch goes through its own forward proxy (:func:`web_worker.proxy.guard`),
which checks the address each connection goes to: a refused navigation (the URL itself or a
redirect hop) ends the job ``unsupported_feature`` (``host_not_allowed``, naming the address);
refused subresources (images, scripts, ``fetch``/XHR, iframes, WebSockets) are counted as
``blocked_requests`` and the page is kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import anyio
from playwright.async_api import BrowserContext, Page, Response
from playwright.async_api import Error as PlaywrightError

from web_worker import requests
from web_worker.browser import BrowserHost, WebSettings
from web_worker.options import WebOptions
from web_worker.proxy import REFUSED_HEADER, UPSTREAM_ERROR_HEADER, Guard, guard
from web_worker.status import network_failure, status_failure
from workers_common import (
    CorruptInput,
    ResourceLimit,
    TransientFailure,
    UnsupportedFeature,
    WorkerFailure,
)

__all__ = ["FetchedFile", "FetchedPage", "fetch"]

_HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """A rendered HTML page.

    :ivar html: the serialized DOM after scripts ran, UTF-8 (its BLAKE3 is the content hash).
    :ivar final_url: the URL after redirects.
    :ivar base_url: ``document.baseURI`` (``<base href>`` resolved, else ``final_url``).
    :ivar blocked_requests: requests of the page the proxy refused (subresources).
    """

    url: str
    final_url: str
    base_url: str
    status: int
    title: str
    html: bytes
    blocked_requests: int = 0


@dataclass(frozen=True, slots=True)
class FetchedFile:
    """A non-HTML response: its bytes as served and its media type (lower case, no
    parameters; empty when the server sent none)."""

    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes
    blocked_requests: int = 0


def _media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def _checked_size(size: int, options: WebOptions, what: str) -> None:
    if size > options.max_bytes:
        raise ResourceLimit(f"{what} is {size} bytes, over options.max_bytes ({options.max_bytes})")


def _refused(url: str, reason: str) -> UnsupportedFeature:
    return UnsupportedFeature(f"host_not_allowed: {url}: {reason}")


def _tunnel_failure(
    message: str, url: str, proxy: Guard, since: int, *, browser: bool
) -> WorkerFailure:
    """A request error as a failure. The proxy answers a refused or unreachable ``https://``
    hop before any TLS, which Chromium reports only as ``ERR_TUNNEL_CONNECTION_FAILED`` and
    Playwright's client as a failed request: when the proxy refused something since the
    request started (``since``: :attr:`Guard.refused`'s length then) — and, for the
    ``browser``'s navigation, the error is that one (its subresources may be refused
    meanwhile) — it is ``host_not_allowed`` (the URL's own refusal, else the latest); a
    connection the proxy could not make is ``transient`` with its error; else
    :func:`network_failure`."""
    tunnel = "ERR_TUNNEL_CONNECTION_FAILED" in message
    if len(proxy.refused) > since and (tunnel or not browser):
        own = proxy.refusal_for(url)
        refusal = own if own in proxy.refused[since:] else proxy.refused[-1]
        assert refusal is not None
        return _refused(url, refusal.reason)
    error = proxy.failure_for(url)
    if error is not None and (tunnel or not browser):
        return TransientFailure(f"fetch failed for {url}: {error}")
    return network_failure(message, url)


def _proxy_answer(headers: dict[str, str], url: str) -> WorkerFailure | None:
    """The failure the proxy's own answer stands for (a refused or unreachable hop)."""
    refused = headers.get(REFUSED_HEADER)
    if refused is not None:
        return _refused(url, refused)
    error = headers.get(UPSTREAM_ERROR_HEADER)
    if error is not None:
        return TransientFailure(f"fetch failed for {url}: {error}")
    return None


async def _download(
    ctx: BrowserContext, url: str, options: WebOptions, settings: WebSettings, proxy: Guard
) -> FetchedFile:
    """Bytes Chromium would only download (a CSV, a ZIP …), through the context's own HTTP
    client (same cookies, same proxy; every redirect hop checked)."""
    since = len(proxy.refused)
    try:
        response = await requests.get(
            ctx.request, url, refusal=settings.refusal, max_redirects=20,
            timeout_s=options.timeout_s,
        )  # fmt: skip
    except requests.HostNotAllowed as exc:
        raise _refused(url, str(exc)) from None
    except requests.TooManyRedirects:
        raise CorruptInput(f"too many redirects from {url}") from None
    except PlaywrightError as exc:
        raise _tunnel_failure(exc.message, url, proxy, since, browser=False) from None
    try:
        failure = _proxy_answer(response.headers, url) or status_failure(
            response.status, url, response.headers.get("retry-after")
        )
        if failure is not None:
            raise failure
        length = response.headers.get("content-length", "")
        if length.isdigit():
            _checked_size(int(length), options, "the response")
        body = await response.body()
        _checked_size(len(body), options, "the response")
        media = _media_type(response.headers.get("content-type"))
        return FetchedFile(url, response.url, response.status, media, body, len(proxy.refused))
    finally:
        await response.dispose()


async def _load(
    ctx: BrowserContext,
    page: Page,
    url: str,
    options: WebOptions,
    settings: WebSettings,
    proxy: Guard,
) -> int | FetchedFile:
    """Everything that talks to the origin: navigate, check the status and media type (a
    non-HTML response is fetched again, as served), wait for ``options.wait_for``. Returns the
    HTTP status of a page now rendered in ``page``, or the file."""
    since = len(proxy.refused)
    try:
        response: Response | None = await page.goto(
            url,
            wait_until=options.wait_until,
            timeout=options.timeout_s * 1000,
        )
    except PlaywrightError as exc:
        if "Download is starting" in exc.message:
            return await _download(ctx, url, options, settings, proxy)
        raise _tunnel_failure(exc.message, url, proxy, since, browser=True) from None
    if response is None:
        raise TransientFailure(f"fetch failed for {url}: no response")
    # ``headers`` is already in hand (no round trip to the browser); it leaves out only
    # cookie-related headers.
    headers = response.headers
    answered = _proxy_answer(headers, url)  # the proxy's answer for the page or a hop
    if answered is not None:
        raise answered
    failure = status_failure(response.status, url, headers.get("retry-after"))
    if failure is not None:
        raise failure
    media = _media_type(headers.get("content-type"))
    if media and media not in _HTML_TYPES:
        # What the page shows is Chromium's viewer (a PDF's is an HTML page of its own), not
        # the bytes served: fetch them again, as served.
        return await _download(ctx, page.url, options, settings, proxy)
    if options.wait_for:
        await page.wait_for_selector(options.wait_for, timeout=options.timeout_s * 1000)
    return response.status


async def _read(
    page: Page, url: str, status: int, options: WebOptions, proxy: Guard
) -> FetchedPage:
    """The rendered page, read from the browser (no request to the origin)."""
    html = (await page.content()).encode("utf-8")
    _checked_size(len(html), options, "the rendered page")
    title, base = await page.evaluate("[document.title, document.baseURI]")
    blocked = len(proxy.refused)
    return FetchedPage(url, page.url, str(base), status, str(title), html, blocked)


async def fetch(
    host: BrowserHost,
    url: str,
    options: WebOptions,
    turn: Callable[[], AbstractAsyncContextManager[None]] = contextlib.nullcontext,
) -> FetchedPage | FetchedFile:
    """Fetch ``url`` in a fresh context (closed before this returns or raises), all of it
    inside ``turn()`` (the origin's politeness gate): making the context and its page, the
    navigation, ``options.wait_for``, a non-HTML re-fetch, reading the rendered HTML and
    closing the context. So two pages of one origin never share the browser: on a machine
    whose cores one page's load already keeps busy, overlapping two cost Chromium ~45 % more
    CPU per page (bench/RESULTS.md, "One page of an origin in the browser at a time").
    ``options.timeout_s`` bounds loading and reading together, and separately making the page
    (time waiting for the turn does not count; starting the browser is bounded by
    Playwright's own launch timeout).

    :raises UnsupportedFeature: ``host_not_allowed`` (the URL or a redirect hop refused,
        :mod:`workers_common.destinations`), ``auth_required`` (401/403).
    :raises CorruptInput: 404, 410 and other statuses that are not worth retrying.
    :raises TransientFailure: 429/5xx (with ``retry_after_s``), network errors, the timeout,
        a missing browser (:class:`~web_worker.browser.BrowserUnavailable`).
    :raises ResourceLimit: more than ``options.max_bytes``.
    """
    why = host.settings.refusal(url)
    if why is not None:
        raise _refused(url, why)
    try:
        async with (
            turn(),
            guard(host.settings.destinations) as proxy,
            host.context(proxy.url) as ctx,
        ):
            with anyio.fail_after(options.timeout_s + 1):
                page = await ctx.new_page()
            # One budget for loading and reading.
            deadline = anyio.current_time() + options.timeout_s + 1
            with anyio.fail_after(options.timeout_s + 1):
                loaded = await _load(ctx, page, url, options, host.settings, proxy)
            if isinstance(loaded, FetchedFile):
                return loaded
            with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                return await _read(page, url, loaded, options, proxy)
    except TimeoutError:
        raise TransientFailure(f"timeout: {url} took over {options.timeout_s:g} s") from None
    except PlaywrightError as exc:  # a wait_for timeout, the page crashing, …
        first = exc.message.strip().splitlines()[0] if exc.message.strip() else type(exc).__name__
        raise TransientFailure(f"fetch failed for {url}: {first}") from None
