"""PDF pages rendered server-side (``GET /v1/sources/{id}/versions/{tx}/pages/{n}.png``) on
each engine, and the viewer drawing a node's box on its page in headless Chromium: the
page comes back as a PNG of the page's size times ``scale``, from a stored upload and from
a job's inline content; a page past the end, a non-PDF source, another scope's source, bad
page numbers and scales are refused; an erased version answers 410."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from playwright.sync_api import Browser

from tests.conftest import CORPUS
from tests.integration.viewer_support import browser_page, ingest, launch_browser, open_viewer, shot
from tests.support.server import ServerProcess

PDF = CORPUS / "pdf" / "2305.03393v1-pg9.pdf"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launch_browser()


@pytest.fixture(scope="module")
def pdf_scope(server: ServerProcess) -> Iterator[tuple[httpx.Client, dict[str, Any]]]:
    """A scope holding the one-page corpus PDF, uploaded (its raw bytes stored), and that
    source's status; converted by docling_worker once per engine."""
    key = server.create_key(f"tenant-{uuid.uuid4()}", "org")
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as api:
        job = ingest(api, "pdf", PDF.name, PDF.read_bytes(), upload=True)
        yield api, api.get(f"/v1/sources/{job['sourceId']}").json()


def _boxed(api: httpx.Client, source_id: str) -> list[dict[str, Any]]:
    nodes = api.get("/v1/nodes", params={"sourceId": source_id, "limit": 1000}).json()["nodes"]
    return [n for n in nodes if n["properties"].get("page") and n["properties"].get("bbox")]


def test_a_page_renders_as_png_at_its_scale(pdf_scope: tuple[httpx.Client, dict[str, Any]]) -> None:
    api, source = pdf_scope
    base = f"/v1/sources/{source['sourceId']}/versions/{source['versions'][0]['sourceVersionTx']}"
    one = api.get(f"{base}/pages/1.png")
    assert one.status_code == 200, one.text
    assert one.headers["content-type"] == "image/png"
    width_pt, height_pt = map(float, one.headers["x-page-size"].split())
    image = Image.open(io.BytesIO(one.content))
    assert image.size == (round(width_pt), round(height_pt))
    double = api.get(f"{base}/pages/1.png", params={"scale": "2"})
    assert Image.open(io.BytesIO(double.content)).size == (
        round(2 * width_pt),
        round(2 * height_pt),
    )
    assert api.get(f"{base}/pages/1.png", params={"scale": "2"}).content == double.content

    past = api.get(f"{base}/pages/2.png")
    assert past.status_code == 404 and "no page 2" in past.json()["error"]["message"]
    for bad, field in (("0.png", "page"), ("x.png", "page"), ("1.jpg", "page"), ("-1.png", "page")):
        resp = api.get(f"{base}/pages/{bad}")
        assert resp.status_code == 400 and field in resp.json()["error"]["message"], bad
    for scale in ("0", "9", "abc", "nan", "-1"):
        resp = api.get(f"{base}/pages/1.png", params={"scale": scale})
        assert resp.status_code == 400 and "scale" in resp.json()["error"]["message"], scale
    assert api.get(f"{base}/pages/1.png", headers={"x-api-key": ""}).status_code == 401
    other = api.get(f"/v1/sources/{source['sourceId']}/versions/1/pages/1.png")
    assert other.status_code == 404


def test_a_page_is_not_found_for_other_scopes_and_formats(
    pdf_scope: tuple[httpx.Client, dict[str, Any]], server: ServerProcess
) -> None:
    api, source = pdf_scope
    tx = source["versions"][0]["sourceVersionTx"]
    path = f"/v1/sources/{source['sourceId']}/versions/{tx}/pages/1.png"
    stranger = server.create_key(f"tenant-{uuid.uuid4()}", "org")
    resp = httpx.get(server.base_url + path, headers={"x-api-key": stranger})
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "NOT_FOUND"
    text = ingest(api, "text", "not-a-pdf.txt", b"Plain text.\n")
    ttx = api.get(f"/v1/sources/{text['sourceId']}").json()["versions"][0]["sourceVersionTx"]
    resp = api.get(f"/v1/sources/{text['sourceId']}/versions/{ttx}/pages/1.png")
    assert resp.status_code == 404 and "PDF sources only" in resp.json()["error"]["message"]


def test_inline_content_renders_and_an_erased_version_is_gone(server: ServerProcess) -> None:
    key = server.create_key(f"tenant-{uuid.uuid4()}", "org")
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=60) as api:
        job = ingest(api, "pdf", "inline.pdf", PDF.read_bytes())  # JSON body: content inline
        source_id = job["sourceId"]
        tx = api.get(f"/v1/sources/{source_id}").json()["versions"][0]["sourceVersionTx"]
        path = f"/v1/sources/{source_id}/versions/{tx}/pages/1.png"
        assert api.get(path).status_code == 200
        erase = api.post(f"/v1/sources/{source_id}/erase", json={"reason": "test"})
        assert erase.status_code == 200, erase.text
        gone = api.get(path)
        assert gone.status_code == 410 and gone.json()["error"]["code"] == "CONTENT_ERASED"


def test_the_viewer_draws_the_node_box_on_its_page(
    pdf_scope: tuple[httpx.Client, dict[str, Any]],
    server: ServerProcess,
    browser: Browser,
    tmp_path: Path,
) -> None:
    api, source = pdf_scope
    tx = source["versions"][0]["sourceVersionTx"]
    node = next(n for n in _boxed(api, source["sourceId"]) if "Hyper Parameter" in str(n))
    page, errors = browser_page(browser)
    fragment = f"#/source/{source['sourceId']}/v/{tx}/node/{node['nodeId']}"
    open_viewer(page, server.base_url, str(api.headers["x-api-key"]), fragment)
    page.wait_for_function("() => document.querySelector('#page-img')?.complete")
    img = page.locator("#page-img").bounding_box()
    box = page.locator("#bbox").bounding_box()
    assert img is not None and box is not None
    assert box["width"] > 4 and box["height"] > 4
    assert img["x"] <= box["x"] and box["x"] + box["width"] <= img["x"] + img["width"] + 0.5
    assert img["y"] <= box["y"] and box["y"] + box["height"] <= img["y"] + img["height"] + 0.5
    # The box sits where the bbox says: its left and top as fractions of the page.
    width_pt, height_pt = map(float, api.get(
        f"/v1/sources/{source['sourceId']}/versions/{tx}/pages/1.png"
    ).headers["x-page-size"].split())  # fmt: skip
    x0, y0, _, _ = node["properties"]["bbox"]
    assert abs((box["x"] - img["x"]) / img["width"] - x0 / width_pt) < 0.01
    assert abs((box["y"] - img["y"]) / img["height"] - y0 / height_pt) < 0.01
    # The image was fetched with the key as a blob: no page URL in the document.
    assert page.get_attribute("#page-img", "src").startswith("blob:")  # type: ignore[union-attr]
    assert page.evaluate("sessionStorage.length") == 1 and "telha_" not in page.url
    shot(page, tmp_path, "pdf-page")
    assert not [e for e in errors if "pageerror" in e]


def test_a_paragraph_across_pages_is_boxed_on_each_page(
    server: ServerProcess, browser: Browser, tmp_path: Path
) -> None:
    """A paragraph the layout pass continued from page 18 onto page 19 of the corpus's
    two-column PDF: the viewer shows both pages, each part's box on its own page."""
    pdf = CORPUS / "pdf" / "testPDF_bad_page_303226.pdf"
    key = server.create_key(f"tenant-{uuid.uuid4()}", "org")
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=120) as api:
        job = ingest(api, "pdf", pdf.name, pdf.read_bytes(), upload=True)
        source_id = job["sourceId"]
        tx = api.get(f"/v1/sources/{source_id}").json()["versions"][0]["sourceVersionTx"]
        node = next(
            n
            for n in _boxed(api, source_id)
            if [b["page"] for b in n["properties"].get("boxes", [])] == [18, 19]
        )
    page, errors = browser_page(browser)
    fragment = f"#/source/{source_id}/v/{tx}/node/{node['nodeId']}"
    open_viewer(page, server.base_url, key, fragment)
    page.wait_for_function(
        "() => [...document.querySelectorAll('img.page-img')].filter((i) => i.complete).length == 2"
    )
    for part in node["properties"]["boxes"]:
        img = page.locator(f"img.page-img[data-page='{part['page']}']").bounding_box()
        box = page.locator(f".bbox[data-page='{part['page']}']").bounding_box()
        assert img is not None and box is not None
        assert box["width"] > 4 and box["height"] > 4
        assert img["x"] <= box["x"] and box["x"] + box["width"] <= img["x"] + img["width"] + 0.5
        assert img["y"] <= box["y"] and box["y"] + box["height"] <= img["y"] + img["height"] + 0.5
    assert page.locator("#page-img").get_attribute("data-page") == "18"
    assert page.locator("#bbox").get_attribute("data-page") == "18"
    shot(page, tmp_path, "pdf-two-pages")
    assert not [e for e in errors if "pageerror" in e]
