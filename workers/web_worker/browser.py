"""The browser of one worker process: Playwright driving the system Chromium
(Debian's ``chromium``; ``playwright install`` is never run).

One :class:`BrowserHost` per process (the worker module's ``lifespan``), started lazily by the
first job — a ``telha serve`` that never gets a ``web`` job never starts a browser — and
started again if the browser dies. Each job gets a fresh browser context
(:meth:`BrowserHost.context`: no cookies, cache or storage shared between jobs), closed on
every path. Chromium runs headless with background networking, component updates, sync, QUIC
and DNS prefetching off, service workers blocked; nothing is downloaded at run time.

Settings (environment; ``telha serve`` exports its ``[web]`` section): ``TELHA_WEB__CHROMIUM_PATH``
(default ``/usr/bin/chromium``) and ``TELHA_WEB__ALLOWED_HOSTS`` (comma-separated host names;
empty: any host). With an allow-list Chromium is started with every request sent to a proxy
that refuses connections (a local socket bound but never listening) except those to the
allowed hosts (``--proxy-bypass-list``): nothing else leaves the browser, subresources
included, at no per-request cost. A job for a URL off the list fails ``unsupported_feature``
(``host_not_allowed``) before anything is requested — tests and benchmarks use
``127.0.0.1``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from playwright.async_api import (
    Browser,
    BrowserContext,
    Playwright,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from workers_common import TransientFailure

__all__ = ["CHROMIUM_ARGS", "BrowserHost", "BrowserUnavailable", "WebSettings", "settings_from_env"]

log = logging.getLogger("web_worker")

#: Launch flags (headless, no sandbox or GPU, no background traffic), plus DNS prefetching off.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--dns-prefetch-disable",
)
#: Seconds closing a context or the browser may take before it is left behind.
_CLOSE_S = 10.0


class BrowserUnavailable(TransientFailure):
    """Chromium is missing or would not start: the job is retried (an operator can install
    it meanwhile); the message says what to do."""


@dataclass(frozen=True, slots=True)
class WebSettings:
    """Process-wide settings (module docstring)."""

    chromium_path: Path = Path("/usr/bin/chromium")
    allowed_hosts: frozenset[str] = frozenset()

    def allows(self, url: str) -> bool:
        """Whether the browser may request ``url`` (non-network schemes always may)."""
        if not self.allowed_hosts:
            return True
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss"):
            return True
        return (parts.hostname or "") in self.allowed_hosts


def settings_from_env(environ: dict[str, str] | None = None) -> WebSettings:
    """:class:`WebSettings` from ``TELHA_WEB__*``; defaults otherwise."""
    env = os.environ if environ is None else environ
    path = env.get("TELHA_WEB__CHROMIUM_PATH", "").strip() or "/usr/bin/chromium"
    hosts = frozenset(
        h.strip().strip("[]") for h in env.get("TELHA_WEB__ALLOWED_HOSTS", "").split(",")
    )
    return WebSettings(Path(path), hosts - {""})


def missing_browser(settings: WebSettings) -> str | None:
    """Why Chromium cannot be started (not there, not executable), or ``None``."""
    path = settings.chromium_path
    if not path.is_file() or not os.access(path, os.X_OK):
        return (
            f"Chromium not found at {path}: install Debian's chromium package"
            " (`apt-get install -y chromium`, which `make setup` does) or set"
            " [web] chromium_path / TELHA_WEB__CHROMIUM_PATH"
        )
    return None


class BrowserHost:
    """Playwright and one Chromium for this process; see the module docstring.

    :param settings: where Chromium is, which hosts it may reach.
    """

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self._lock = anyio.Lock()
        self._manager: Any = None
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._dead_proxy: socket.socket | None = None

    async def playwright(self) -> Playwright:
        """The running Playwright driver (started with the browser).

        :raises BrowserUnavailable: Chromium is missing or does not start.
        """
        await self.browser()
        assert self._playwright is not None
        return self._playwright

    async def browser(self) -> Browser:
        """The process's browser, launched on first use and again after it died.

        :raises BrowserUnavailable: Chromium is missing or does not start.
        """
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            problem = missing_browser(self.settings)
            if problem is not None:
                raise BrowserUnavailable(problem)
            if self._playwright is None:
                self._manager = async_playwright()
                self._playwright = await self._manager.start()
            assert self._playwright is not None
            try:
                self._browser = await self._playwright.chromium.launch(
                    executable_path=str(self.settings.chromium_path),
                    headless=True,
                    args=[*CHROMIUM_ARGS, *self._guard_args()],
                )
            except PlaywrightError as exc:
                raise BrowserUnavailable(f"Chromium did not start: {exc.message}") from None
            log.info("web_worker: started %s", self.settings.chromium_path)
            return self._browser

    @contextlib.asynccontextmanager
    async def context(self) -> AsyncIterator[BrowserContext]:
        """A fresh browser context for one job, closed however the job ends.

        :raises BrowserUnavailable: Chromium is missing or does not start.
        """
        browser = await self.browser()
        ctx = await browser.new_context(service_workers="block")
        try:
            yield ctx
        finally:
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(_CLOSE_S),
                contextlib.suppress(PlaywrightError),
            ):
                await ctx.close()

    def _guard_args(self) -> list[str]:
        """Launch flags of the allow-list (module docstring); none without one."""
        if not self.settings.allowed_hosts:
            return []
        if self._dead_proxy is None:
            self._dead_proxy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._dead_proxy.bind(("127.0.0.1", 0))  # bound, never listening: refuses
        port = self._dead_proxy.getsockname()[1]
        bypass = ";".join(f"[{h}]" if ":" in h else h for h in sorted(self.settings.allowed_hosts))
        # "<-loopback>" (first: later it cancels the list's loopback entries) drops Chromium's
        # implicit loopback bypass, so only the listed hosts are reachable.
        return [
            f"--proxy-server=http://127.0.0.1:{port}",
            f"--proxy-bypass-list=<-loopback>;{bypass}",
        ]

    async def aclose(self) -> None:
        """Close the browser and stop Playwright (idempotent, bounded, shielded)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_S):
            async with self._lock:
                browser, self._browser = self._browser, None
                manager, self._manager, self._playwright = self._manager, None, None
                if browser is not None:
                    with contextlib.suppress(PlaywrightError):
                        await browser.close()
                if manager is not None:
                    with contextlib.suppress(PlaywrightError):
                        await manager.__aexit__(None, None, None)
                if self._dead_proxy is not None:
                    self._dead_proxy.close()
                    self._dead_proxy = None
