"""web_worker's fetch against pages served on 127.0.0.1 by the test, without a server: the
bytes of a non-HTML response are the bytes served (not Chromium's viewer), whichever way the
browser handles the type; a missing page maps to its failure."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

import web_worker
from tests.conftest import CORPUS
from tests.support.site import serve_site
from web_worker.fetch import FetchedFile, FetchedPage, fetch
from web_worker.options import parse_options
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


async def test_allow_list_stops_every_other_host(process: Any) -> None:
    """Only 127.0.0.1 is reachable: a subresource on ``localhost`` (the same server, another
    host name) and a redirect there never arrive."""
    with serve_site() as site:
        port = site.base.rsplit(":", 1)[1]
        other = f"http://localhost:{port}"
        url = site.page(
            "/guarded.html",
            f"<img src='{other}/img-other.png'><img src='{site.base}/img-same.png'><p>x</p>",
        )
        page = await fetch(process.host, url, parse_options({}))
        assert isinstance(page, FetchedPage)
        assert site.hit_count("/img-same.png") == 1
        assert site.hit_count("/img-other.png") == 0
        away = site.redirect("/away", f"{other}/target.html")
        with pytest.raises(UnsupportedFeature, match="host_not_allowed"):
            await fetch(process.host, away, parse_options({}))
        assert site.hit_count("/target.html") == 0
