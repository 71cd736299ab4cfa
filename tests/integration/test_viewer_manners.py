"""Small things a person sees in the viewer (docs/viewer.md), in headless Chromium against
a real ``telha serve``: the key form's hint names the config file; a version shows its
canonical text's size beside the raw file's; a diff draws a heading only over a list with
something in it. Screenshots go to the test's temp folder (docs/viewer-diff.png is one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser

from tests.integration.viewer_support import browser_page, ingest, launch_browser, open_viewer, shot
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launch_browser()


@pytest.fixture
def api(server: ServerProcess, scope_key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": scope_key}, timeout=60) as c:
        yield c


def test_the_key_form_says_how_to_make_a_key_with_the_config(
    server: ServerProcess, browser: Browser, tmp_path: Path
) -> None:
    page, errors = browser_page(browser)
    page.goto(f"{server.base_url}/ui/")
    hint = page.inner_text("#key-help")
    assert "telha api-key create --config config.toml --tenant T --org O" in hint
    shot(page, tmp_path, "key-form")
    assert not errors


def test_sizes_of_file_and_text_and_a_diff_without_empty_headings(
    server: ServerProcess, api: httpx.Client, browser: Browser, tmp_path: Path
) -> None:
    # A BOM and CRLF line ends: the canonical text is shorter than the file.
    first = b"\xef\xbb\xbfKept paragraph.\r\n\r\nRemoved paragraph.\r\n"
    ingest(api, "text", "sizes.txt", first)
    job = ingest(api, "text", "sizes.txt", b"Kept paragraph.\n\nAdded paragraph, new.\n")
    source_id = job["sourceId"]
    versions = api.get(f"/v1/sources/{source_id}").json()["versions"]
    old, new = versions[1]["sourceVersionTx"], versions[0]["sourceVersionTx"]
    old_text = api.get(f"/v1/sources/{source_id}/versions/{old}/text").content
    assert len(old_text) < len(first)

    page, errors = browser_page(browser)
    open_viewer(page, server.base_url, api.headers["x-api-key"], f"#/source/{source_id}/v/{old}")
    page.wait_for_function(
        "() => document.querySelector('#version-size')?.textContent.includes('canonical text')"
    )
    said = page.inner_text("#version-size")
    assert said == f"file {len(first)} bytes · canonical text {len(old_text)} bytes · tx {old}"
    shot(page, tmp_path, "version-sizes")

    page.evaluate("f => { location.hash = f }", f"#/source/{source_id}/diff/{old}/{new}")
    page.wait_for_function(
        "() => document.querySelector('#added')?.textContent.includes('Added paragraph')"
    )
    visible = page.evaluate(
        "[...document.querySelectorAll('.diff h2')].filter(e => !e.hidden).map(e => e.textContent)"
    )
    assert visible == ["Added", "Removed"]  # nothing changed in place: no "Changed" heading
    assert page.locator("#changed-heading").is_hidden()
    shot(page, tmp_path, "diff")
    assert not [e for e in errors if "pageerror" in e]
