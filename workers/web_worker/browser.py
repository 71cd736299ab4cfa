"""The browser of one worker process: Playwright driving the system Chromium
(Debian's ``chromium``; ``playwright install`` is never run).

One :class:`BrowserHost` per process (the worker module's ``lifespan``), started lazily by the
first job — a ``telha serve`` that never gets a ``web`` job never starts a browser — and
started again if the browser dies. Each job gets a fresh browser context
(:meth:`BrowserHost.context`: no cookies, cache or storage shared between jobs), closed on
every path, whose every request goes through that job's own forward proxy
(:mod:`web_worker.proxy`, loopback included), which checks the address it connects to
(:mod:`workers_common.destinations`). Requests outside any context go to a proxy that refuses
every connection (a local socket bound but never listening). Chromium runs headless with its
sandbox on and as an unprivileged user (:mod:`web_worker.sandbox`), with background
networking, component updates, sync, QUIC, DNS prefetching and WebRTC's non-proxied UDP off,
service workers blocked; nothing is downloaded at run time.

Settings (environment; ``telha serve`` exports its ``[web]`` section): ``TELHA_WEB__CHROMIUM_PATH``
(default ``/usr/bin/chromium``), ``TELHA_WEB__ALLOWED_HOSTS`` (comma-separated entries: host,
host:port, address, address:port, CIDR; empty: any public address),
``TELHA_WEB__DENY_PRIVATE`` (default true), ``TELHA_WEB__ALLOW_UNSANDBOXED`` (default
false) and ``TELHA_WEB__BROWSER_SYS_NICE`` (default false; :mod:`web_worker.sandbox`). Tests
and benchmarks list their loopback site (``127.0.0.1`` or ``127.0.0.1:PORT``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from playwright.async_api import (
    Browser,
    BrowserContext,
    Playwright,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from web_worker import sandbox
from workers_common import TransientFailure
from workers_common.destinations import Destinations

__all__ = [
    "CHROMIUM_ARGS",
    "BrowserHost",
    "BrowserUnavailable",
    "WebSettings",
    "settings_from_env",
    "startup_problem",
]

log = logging.getLogger("web_worker")

#: Launch flags (headless, no GPU, no background traffic, DNS prefetching off, WebRTC's UDP
#: only through the proxy, which takes none: no ICE candidate reaches an address unchecked).
#: ``--no-sandbox`` is never among them (Playwright adds it only when the sandbox is off).
CHROMIUM_ARGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--dns-prefetch-disable",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)
#: Seconds closing a context or the browser may take before it is left behind.
_CLOSE_S = 10.0


class BrowserUnavailable(TransientFailure):
    """Chromium is missing or would not start: the job is retried (an operator can install
    it meanwhile); the message says what to do."""


def _flag(value: str | None, default: bool) -> bool:
    if value is None or not value.strip():
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class WebSettings:
    """Process-wide settings (module docstring)."""

    chromium_path: Path = Path("/usr/bin/chromium")
    allowed_hosts: tuple[str, ...] = ()
    deny_private: bool = True
    allow_unsandboxed: bool = False
    destinations: Destinations = field(default_factory=Destinations)
    browser_sys_nice: bool = False

    def refusal(self, url: str) -> str | None:
        """Why ``url`` is refused before any connection (an address literal or a host off
        the allow-list), ``None`` when it may be tried (non-network schemes always may)."""
        return self.destinations.precheck(url)

    def allows(self, url: str) -> bool:
        """Whether ``url`` passes :meth:`refusal`."""
        return self.refusal(url) is None


def settings_from_env(environ: dict[str, str] | None = None) -> WebSettings:
    """:class:`WebSettings` from ``TELHA_WEB__*``; defaults otherwise.

    :raises ValueError: an ``allowed_hosts`` entry that does not parse (the message names it).
    """
    env = os.environ if environ is None else environ
    path = env.get("TELHA_WEB__CHROMIUM_PATH", "").strip() or "/usr/bin/chromium"
    hosts = tuple(
        h.strip() for h in env.get("TELHA_WEB__ALLOWED_HOSTS", "").split(",") if h.strip()
    )
    deny = _flag(env.get("TELHA_WEB__DENY_PRIVATE"), True)
    unsandboxed = _flag(env.get("TELHA_WEB__ALLOW_UNSANDBOXED"), False)
    sys_nice = _flag(env.get("TELHA_WEB__BROWSER_SYS_NICE"), False)
    try:
        rules = Destinations.from_config(hosts, deny)
    except ValueError as exc:
        raise ValueError(f"[web] allowed_hosts: {exc}") from None
    return WebSettings(Path(path), hosts, deny, unsandboxed, rules, sys_nice)


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


async def startup_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why this process must not start the web worker, or ``None``: a bad
    ``[web] allowed_hosts`` entry, or no sandbox for Chromium
    (:func:`web_worker.sandbox.sandbox_problem`) while ``[web] allow_unsandboxed`` is false.
    ``telha serve`` asks before starting, a remote worker's ``lifespan`` too."""
    try:
        settings = settings_from_env(environ)
    except ValueError as exc:
        return str(exc)
    problem = await anyio.to_thread.run_sync(sandbox.sandbox_problem)
    if problem is None or settings.allow_unsandboxed:
        return None
    return (
        f"Chromium's sandbox is unavailable: {problem}. The web worker refuses to run page"
        " scripts unsandboxed; fix that, or set [web] allow_unsandboxed = true"
        " (TELHA_WEB__ALLOW_UNSANDBOXED=true) to accept the risk, or leave web_worker out"
        " of [workers] in_process"
    )


class BrowserHost:
    """Playwright and one Chromium for this process; see the module docstring.

    :param settings: where Chromium is, which destinations it may reach.
    :param sandboxed: whether Chromium's sandbox is available (else it runs with
        ``--no-sandbox``, allowed by ``[web] allow_unsandboxed`` only).
    """

    def __init__(self, settings: WebSettings, *, sandboxed: bool = True) -> None:
        self.settings = settings
        self.sandboxed = sandboxed
        self._lock = anyio.Lock()
        self._manager: Any = None
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._dead_proxy: socket.socket | None = None
        self._launcher: Path | None = None

    async def playwright(self) -> Playwright:
        """The running Playwright driver (started with the browser).

        :raises BrowserUnavailable: Chromium is missing or does not start.
        """
        await self.browser()
        assert self._playwright is not None
        return self._playwright

    def _executable(self) -> Path:
        """What Playwright starts: Chromium, or its launcher under the browser user."""
        try:
            account = sandbox.browser_account()
        except KeyError:
            account = None  # unsandboxed and no such user: allowed by allow_unsandboxed only
        if account is None:
            return self.settings.chromium_path
        if self._launcher is None:
            self._launcher = sandbox.write_launcher(
                self.settings.chromium_path, account, sys_nice=self.settings.browser_sys_nice
            )
        return self._launcher

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
                    executable_path=str(self._executable()),
                    headless=True,
                    chromium_sandbox=self.sandboxed,
                    args=[*CHROMIUM_ARGS, *self._guard_args()],
                )
            except PlaywrightError as exc:
                raise BrowserUnavailable(f"Chromium did not start: {exc.message}") from None
            log.info(
                "web_worker: started %s (sandbox %s)",
                self.settings.chromium_path,
                "on" if self.sandboxed else "OFF",
            )
            return self._browser

    @contextlib.asynccontextmanager
    async def context(self, proxy_url: str) -> AsyncIterator[BrowserContext]:
        """A fresh browser context for one job whose every request (loopback included) goes
        to the proxy at ``proxy_url``, closed however the job ends.

        :raises BrowserUnavailable: Chromium is missing or does not start.
        """
        browser = await self.browser()
        ctx = await browser.new_context(
            service_workers="block", proxy={"server": proxy_url, "bypass": "<-loopback>"}
        )
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
        """Launch flags sending every request outside a job's context to a refusing proxy
        (``<-loopback>`` drops Chromium's implicit loopback bypass)."""
        if self._dead_proxy is None:
            self._dead_proxy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._dead_proxy.bind(("127.0.0.1", 0))  # bound, never listening: refuses
        port = self._dead_proxy.getsockname()[1]
        return [f"--proxy-server=http://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>"]

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
                if self._launcher is not None:
                    shutil.rmtree(self._launcher.parent, ignore_errors=True)
                    self._launcher = None
