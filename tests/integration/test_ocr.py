"""OCR through ``telha serve`` on each engine (docs/formats.md, "OCR"): a PNG made from corpus
text and the corpus' scanned PDF are read back as paragraphs with page, box, confidence and
spans that slice to their text; the job's stats count the OCR; ``options.ocr = off``, a bad
``ocr`` value and a corrupt image end ``dead`` with their kind, not retried."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.ocr_pages import cer, corpus_words, render_page
from tests.support.queue_env import Tenant
from tests.support.server import write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("ocr")
    config = write_config(
        folder,
        engine,
        workers={"in_process": ["docling_worker"], "concurrency": 1},
        docling={"timeout_s": 240, "mem_ceiling_mb": 4096},
        ocr={"min_confidence": 30, "page_timeout_s": 120},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _ingest(
    tenant: Tenant, fmt: str, name: str, data: bytes, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "format": fmt, "name": name, "contentBase64": base64.b64encode(data).decode(),
    }  # fmt: skip
    if options is not None:
        body["options"] = options
    resp = await tenant.client.post("/v1/ingest", json=body)
    assert resp.status_code == 202, resp.text
    return await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=240)


async def _paragraphs(tenant: Tenant, source_id: str) -> list[dict[str, Any]]:
    page = await tenant.client.get(
        "/v1/nodes", params={"sourceId": source_id, "label": "PARAGRAPH", "limit": 1000}
    )
    assert page.status_code == 200, page.text
    nodes = list(page.json()["nodes"])
    assert nodes
    for node in nodes:
        (span,) = node["provenance"]["spans"]
        assert span["text"] == node["properties"]["text"]
    return nodes


def _png(words: list[str]) -> tuple[bytes, str, tuple[int, int]]:
    image, drawn = render_page(words, 300)
    image = image.crop((0, 0, image.width, 1000))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", dpi=(300, 300))
    return buffer.getvalue(), drawn, image.size


async def test_a_png_round_trips_with_boxes_in_pixels(tenant: Tenant) -> None:
    data, drawn, (width, height) = _png(list(corpus_words()[20:45]))
    job = await _ingest(tenant, "png", "page.png", data)
    assert job["state"] == "completed", job
    nodes = await _paragraphs(tenant, str(job["sourceId"]))
    text = " ".join(n["properties"]["text"] for n in nodes)
    assert cer(drawn, text) <= 0.02, text
    for node in nodes:
        props = node["properties"]
        x0, y0, x1, y1 = props["bbox"]
        assert props["page"] == 1 and 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
        assert 0 <= props["ocr_confidence"] <= 100


async def test_the_scanned_pdf_reads_with_page_and_box(tenant: Tenant) -> None:
    data = (CORPUS / "pdf" / "testOCR.pdf").read_bytes()
    job = await _ingest(tenant, "pdf", "testOCR.pdf", data)
    assert job["state"] == "completed", job
    (node,) = await _paragraphs(tenant, str(job["sourceId"]))
    props = node["properties"]
    assert props["text"] == "Happy New Year 2003!"
    assert props["page"] == 1 and props["ocr_confidence"] > 50
    x0, y0, x1, y1 = props["bbox"]
    assert 0 <= x0 < x1 <= 792 and 0 <= y0 < y1 <= 612  # points, top-left origin
    off = await _ingest(tenant, "pdf", "testOCR-off.pdf", data, {"ocr": "off"})
    assert off["state"] == "dead", off
    assert str(off["failureReason"]).startswith("unsupported_feature: ocr_required"), off


async def test_bad_images_end_dead_and_bad_options_are_refused(tenant: Tenant) -> None:
    data, _drawn, _size = _png(list(corpus_words()[:4]))
    cases = [
        ("png", data[:300], "corrupt_input"),
        ("webp", b"RIFF\x10\x00\x00\x00WEBPVP8 garbage", "corrupt_input"),
    ]
    for fmt, raw, reason in cases:
        job = await _ingest(tenant, fmt, f"bad.{fmt}", raw, None)
        assert job["state"] == "dead", job
        assert str(job["failureReason"]).startswith(reason), job
        assert job["attempts"] == 1  # permanent kinds are not retried
    for options in ({"ocr": "sometimes"}, {"ocr": True}, {"dpi": 300}):
        resp = await tenant.client.post(
            "/v1/ingest",
            json={
                "format": "png",
                "name": "opts.png",
                "contentBase64": base64.b64encode(data).decode(),
                "options": options,
            },
        )
        assert resp.status_code == 400, resp.text  # checked at request time
        assert resp.json()["error"]["message"].startswith(f"options.{next(iter(options))}")


async def test_an_unknown_image_format_is_refused(tenant: Tenant) -> None:
    resp = await tenant.client.post(
        "/v1/ingest", json={"format": "gif", "name": "a.gif", "contentBase64": "R0lGODlh"}
    )
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["code"] == "INVALID_REQUEST"
    assert "png" in resp.json()["error"]["message"]  # the known formats are listed
