"""Driving the provenance viewer (``/ui/``) in headless Chromium: the system browser that
web_worker drives (``/usr/bin/chromium``, installed by ``make setup``), through Playwright's
sync API, against a real ``telha serve``."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.support.wait import wait_job_blocking

__all__ = ["CHROMIUM", "browser_page", "ingest", "launch_browser", "open_viewer", "shot"]

CHROMIUM = Path("/usr/bin/chromium")
_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def launch_browser() -> Iterator[Browser]:
    """A headless Chromium for a module's tests (skipped, with the reason, when the system
    browser is absent: ``make setup`` installs it)."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: run `make setup`")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def browser_page(browser: Browser, width: int = 1280, height: int = 800) -> tuple[Page, list[str]]:
    """A new page in its own context, and the list its console errors and page errors
    (uncaught exceptions, CSP violations) are appended to."""
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page, errors


def open_viewer(page: Page, base_url: str, key: str, fragment: str = "") -> None:
    """Load ``/ui/``, type ``key`` into the key form, then go to ``#fragment``."""
    page.goto(f"{base_url}/ui/")
    page.fill("#key", key)
    page.click("form.keyform button[type=submit]")
    page.wait_for_selector("#sources")
    if fragment:
        page.evaluate("f => { location.hash = f }", fragment)


def ingest(
    client: httpx.Client, fmt: str, name: str, data: bytes, *, upload: bool = False
) -> dict[str, Any]:
    """Ingest ``data`` (JSON body, or a multipart upload) and wait for its job to complete;
    the job's status body (with ``sourceId``)."""
    if upload:
        resp = client.post(
            "/v1/ingest", files={"file": (name, data)}, data={"format": fmt, "name": name}
        )
    else:
        body = {"format": fmt, "name": name, "contentBase64": base64.b64encode(data).decode()}
        resp = client.post("/v1/ingest", json=body)
    assert resp.status_code == 202, resp.text
    job = wait_job_blocking(client, resp.json()["jobId"], "completed", "dead", within_s=240)
    assert job["state"] == "completed", job
    return job


def shot(page: Page, folder: Path, name: str) -> Path:
    """A screenshot of the page as ``folder/name.png``."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path
