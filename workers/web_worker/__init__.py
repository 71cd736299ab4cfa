"""``web_worker``: web pages (``format=web``; docs/formats.md, "Web pages").

The job's ``name`` is the URL; it carries no content. :func:`handle` fetches the page with
Playwright driving the system Chromium (:mod:`web_worker.browser`: one browser per worker
process, a fresh context per job), one fetch per origin at a time with a polite delay
(:mod:`web_worker.gate`), every connection through a proxy that checks the address it goes
to (:mod:`web_worker.proxy`, :mod:`workers_common.destinations`: private addresses are refused
unless listed); projects the rendered HTML with docling's ``html`` projection plus
the page's properties and its links as ``URL_REF`` nodes (:mod:`web_worker.project`); reports
BLAKE3 of the rendered HTML as ``contentHash``, so core deduplicates an unchanged recrawl at
submit time (the job completes with a ``deduplicated`` event, no new version); and asks for
child ``web`` jobs for the links a crawl follows (:mod:`web_worker.crawl`, robots.txt by
:mod:`web_worker.robots`). A response that is not HTML becomes a child job of its format.
Options: :mod:`web_worker.options`. Failures: :mod:`web_worker.status`.

Deterministic: the same rendered HTML and options give the same submission (no fetch time
in it; the job's events have it).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio

from web_worker.browser import BrowserHost, missing_browser, settings_from_env, startup_problem
from web_worker.crawl import candidates, child_options
from web_worker.fetch import FetchedFile, fetch
from web_worker.gate import OriginGate
from web_worker.links import absolute_url, origin_of
from web_worker.options import WebOptions, parse_options
from web_worker.project import project_file, project_page
from web_worker.robots import RobotsCache
from web_worker.sandbox import sandbox_problem
from workers_common import Job, UnsupportedFeature
from workers_common.projection import installed
from workers_common.run import UsageError

__all__ = [
    "FORMATS",
    "PROJECTION_VERSION",
    "handle",
    "lifespan",
    "parser_versions",
    "startup_problem",
]

FORMATS = ("web",)
#: How this worker reads bytes (:mod:`workers_common.projection`): raise it whenever the same
#: bytes and options would project differently.
PROJECTION_VERSION = 1


def parser_versions() -> dict[str, str]:
    """The installed versions of the parsers that shape this worker's output:
    the browser renders the page."""
    return installed("playwright")


log = logging.getLogger("web_worker")


class _Process:
    """What one worker process shares between its jobs: the browser, the per-origin gate,
    the robots.txt cache."""

    def __init__(self, *, sandboxed: bool) -> None:
        self.host = BrowserHost(settings_from_env(), sandboxed=sandboxed)
        self.gate = OriginGate()
        self.robots = RobotsCache()


_CURRENT: contextvars.ContextVar[_Process] = contextvars.ContextVar("web_worker")


@contextlib.asynccontextmanager
async def lifespan() -> AsyncIterator[None]:
    """The worker process's browser host, for the consumers started inside (entered once by
    ``telha serve``'s pools or ``workers_common.run``). The browser starts with the first
    job; a missing Chromium is logged here, at start, and each job then fails ``transient``
    with the same message (nothing hangs). The browser is closed on exit.

    :raises UsageError: :func:`~web_worker.browser.startup_problem` (a bad allow-list, no
        sandbox for Chromium and ``[web] allow_unsandboxed`` false): the worker does not
        start (a remote worker exits 2 with the message).
    """
    problem = await startup_problem()
    if problem is not None:
        raise UsageError(f"web_worker: {problem}")
    sandboxed = await anyio.to_thread.run_sync(sandbox_problem) is None
    if not sandboxed:
        log.warning("web_worker: Chromium runs WITHOUT its sandbox ([web] allow_unsandboxed)")
    process = _Process(sandboxed=sandboxed)
    problem = missing_browser(process.host.settings)
    if problem is not None:
        log.error("web_worker: %s; web jobs will fail until it is installed", problem)
    token = _CURRENT.set(process)
    try:
        yield
    finally:
        _CURRENT.reset(token)
        await process.host.aclose()


def _process() -> _Process:
    try:
        return _CURRENT.get()
    except LookupError:
        raise RuntimeError("web_worker.handle runs inside web_worker.lifespan()") from None


async def _children(
    process: _Process, links: list[str], options: WebOptions, page_urls: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Child ``web`` jobs for the links in scope that robots.txt allows, robots.txt fetched
    per origin only until the budget is filled."""
    crawl = options.crawl
    origin = crawl.origin or origin_of(page_urls[-1])
    found = candidates(links, crawl, page_urls=page_urls, origin=origin)
    allowed: list[str] = []
    for url in found:
        if len(allowed) >= crawl.max_pages - 1:
            break
        if not process.host.settings.allows(url):
            continue
        playwright = await process.host.playwright()
        robots = await process.robots.get(playwright, origin_of(url), process.host.settings)
        if robots.allows(url):
            allowed.append(url)
    children = child_options(allowed, crawl, options.raw, origin=origin)
    return [{"format": "web", "name": url, "options": opts} for url, opts in children]


def _polite_delay(process: _Process, url: str, options: WebOptions) -> float:
    """The origin's delay: the option, raised by a cached robots.txt ``Crawl-delay``."""
    delay = options.crawl.delay_s
    if options.crawl.max_depth:
        cached = process.robots.cached(origin_of(url))
        if cached is not None:
            delay = max(delay, cached.crawl_delay_s())
    return delay


async def handle(job: Job) -> dict[str, Any]:
    """Fetch and project one ``web`` job (module docstring); awaited on the event loop, the
    docling projection runs in a worker thread and a docling child process.

    :raises UnsupportedFeature: a bad option, a URL that is not http(s), a host off the
        allow-list, 401/403 (``auth_required``), a media type no worker reads.
    :raises CorruptInput: 404/410 and other permanent HTTP statuses.
    :raises TransientFailure: 429/5xx (``Retry-After`` honoured), network errors, timeouts,
        no browser.
    :raises ResourceLimit: over ``options.max_bytes``.
    """
    options = parse_options(job.options)
    url = absolute_url(job.name, job.name)
    if url is None:
        raise UnsupportedFeature(f"url: {job.name!r} is not an absolute http(s) URL")
    process = _process()
    delay = _polite_delay(process, url, options)
    fetched = await fetch(
        process.host, url, options, lambda: process.gate.turn(origin_of(url), delay)
    )
    if isinstance(fetched, FetchedFile):
        # Base64 and BLAKE3 of up to options.max_bytes: off the event loop.
        return await anyio.to_thread.run_sync(project_file, fetched, job.name)
    sub, links = await anyio.to_thread.run_sync(
        lambda: project_page(fetched, job.name, clarify=options.clarify)
    )
    page_urls = tuple(dict.fromkeys((url, absolute_url(url, fetched.final_url) or url)))
    children = await _children(process, links, options, page_urls)
    if children:
        sub["childJobs"] = children
        sub["stats"]["children"] = len(children)
    return sub
