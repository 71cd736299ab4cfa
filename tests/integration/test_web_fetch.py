"""web_worker's fetch against pages served on 127.0.0.1 by the test, without a server: the
bytes of a non-HTML response are the bytes served (not Chromium's viewer), whichever way the
browser handles the type; a missing page maps to its failure."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import web_worker
from tests.conftest import CORPUS
from tests.support.site import serve_site
from web_worker import requests
from web_worker.fetch import FetchedFile, FetchedPage, fetch
from web_worker.links import origin_of
from web_worker.options import parse_options
from web_worker.proxy import guard
from workers_common import CorruptInput, UnsupportedFeature

pytestmark = pytest.mark.anyio


@pytest.fixture
async def process(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    monkeypatch.setenv("TELHA_WEB__ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.delenv("TELHA_WEB__CHROMIUM_PATH", raising=False)
    async with web_worker.lifespan():
        yield web_worker._process()


@pytest.mark.parametrize(
    ("rel", "media"),
    [
        ("pdf/simple1.pdf", "application/pdf"),  # shown in Chromium's PDF viewer
        ("csv/bom.csv", "text/csv"),  # downloaded by Chromium
        ("tsv/table.tsv", "text/plain"),  # rendered as text by Chromium
    ],
)
async def test_non_html_bytes_are_the_bytes_served(process: Any, rel: str, media: str) -> None:
    raw = (CORPUS / rel).read_bytes()
    with serve_site() as site:
        url = site.page(f"/{os.path.basename(rel)}", raw, content_type=media)
        fetched = await fetch(process.host, url, parse_options({}))
    assert isinstance(fetched, FetchedFile)
    assert fetched.body == raw and fetched.content_type == media


async def test_html_page_and_404(process: Any) -> None:
    with serve_site() as site:
        url = site.page("/p.html", "<title>T</title><p>x</p>")
        page = await fetch(process.host, url, parse_options({}))
        assert isinstance(page, FetchedPage)
        assert (page.title, page.status, page.final_url, page.base_url) == ("T", 200, url, url)
        with pytest.raises(CorruptInput, match="http_status 404"):
            await fetch(process.host, site.url("/missing"), parse_options({}))


@contextlib.asynccontextmanager
async def _worker(monkeypatch: pytest.MonkeyPatch, **env: str) -> AsyncIterator[Any]:
    """A web worker process's state with ``TELHA_WEB__<KEY>`` settings."""
    for key, value in env.items():
        monkeypatch.setenv(f"TELHA_WEB__{key.upper()}", value)
    async with web_worker.lifespan():
        yield web_worker._process()


async def test_allow_list_by_host_port_stops_every_other_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the listed ``127.0.0.1:PORT`` is reachable: a subresource on another port of the
    same address (as ``localhost``, which the early check cannot judge) and a redirect there
    never arrive, and are counted."""
    with serve_site() as site, serve_site() as other:
        listed = site.base.removeprefix("http://")
        async with _worker(monkeypatch, allowed_hosts=listed) as process:
            away = other.base.replace("127.0.0.1", "localhost")
            url = site.page(
                "/guarded.html",
                f"<img src='{away}/img-other.png'><img src='{site.base}/img-same.png'><p>x</p>",
            )
            page = await fetch(process.host, url, parse_options({}))
            assert isinstance(page, FetchedPage)
            assert site.hit_count("/img-same.png") == 1
            assert page.blocked_requests == 1
            # https: the proxy refuses the CONNECT (Chromium: ERR_TUNNEL_CONNECTION_FAILED).
            secure = away.replace("http://", "https://")
            with pytest.raises(UnsupportedFeature, match=r"host_not_allowed: https://.*not on"):
                await fetch(process.host, f"{secure}/tls.html", parse_options({}))
            hop = site.redirect("/away", f"{away}/target.html")
            with pytest.raises(UnsupportedFeature, match=r"host_not_allowed: .*localhost:\d+"):
                await fetch(process.host, hop, parse_options({}))
            # Playwright's own HTTP client (downloads, robots.txt) goes through the proxy too.
            async with guard(process.host.settings.destinations) as proxy:
                pw = await process.host.playwright()
                api = await pw.request.new_context(proxy={"server": proxy.url})
                try:
                    with pytest.raises(requests.HostNotAllowed, match="not on"):
                        await requests.get(
                            api, f"{away}/direct.csv", refusal=lambda _u: None,
                            max_redirects=0, timeout_s=10,
                        )  # fmt: skip
                finally:
                    await api.dispose()
        assert other.hits == []


async def test_default_denies_loopback_and_a_name_entry_does_not_allow_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serve_site() as site:
        url = site.page("/p.html", "<p>x</p>")
        port = site.base.rsplit(":", 1)[1]
        async with _worker(monkeypatch, allowed_hosts="") as process:
            with pytest.raises(UnsupportedFeature, match="is a loopback address"):
                await fetch(process.host, url, parse_options({}))
        named = f"http://localhost:{port}/p.html"
        async with _worker(monkeypatch, allowed_hosts="localhost") as process:
            with pytest.raises(
                UnsupportedFeature, match=r"localhost:\d+ \(127.0.0.1\) is a loopback"
            ):
                await fetch(process.host, named, parse_options({}))
        assert site.hits == []
        # An intranet crawler: deny_private = false.
        async with _worker(monkeypatch, allowed_hosts="", deny_private="false") as process:
            page = await fetch(process.host, named, parse_options({}))
            assert isinstance(page, FetchedPage)
        async with _worker(monkeypatch, allowed_hosts="127.0.0.0/8") as process:
            page = await fetch(process.host, url, parse_options({}))
            assert isinstance(page, FetchedPage) and page.blocked_requests == 0


async def _most_contexts_at_once(process: Any, urls: list[str]) -> int:
    """Fetch ``urls`` at once, each through its origin's turn (as ``handle`` does), and
    return the most browser contexts open at the same time (polled every 5 ms)."""
    browser = await process.host.browser()
    most = 0
    done = anyio.Event()

    async def watch() -> None:
        nonlocal most
        while not done.is_set():
            most = max(most, len(browser.contexts))
            await anyio.sleep(0.005)

    async def one(url: str) -> None:
        page = await fetch(
            process.host, url, parse_options({}), lambda: process.gate.turn(origin_of(url), 0)
        )
        assert isinstance(page, FetchedPage) and page.status == 200

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        async with anyio.create_task_group() as fetches:
            for url in urls:
                fetches.start_soon(one, url)
        done.set()
    return most


async def test_one_origin_has_one_page_in_the_browser_at_a_time(process: Any) -> None:
    """The origin's turn covers a fetch's whole browser work (context to close): two pages
    of one origin never share the browser, while two origins' pages do (docs/formats.md,
    "Web pages")."""
    with serve_site() as site, serve_site() as other:
        slow = "<title>T</title><p>slow</p>"
        one_origin = [site.page(f"/s{i}.html", slow, delay_s=0.3) for i in range(2)]
        two_origins = [site.url("/s0.html"), other.page("/s0.html", slow, delay_s=0.3)]
        assert await _most_contexts_at_once(process, one_origin) == 1
        assert await _most_contexts_at_once(process, two_origins) == 2
