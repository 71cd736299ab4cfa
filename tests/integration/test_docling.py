"""docling_worker inside ``telha serve``: real corpus documents
POSTed, read back as sections, paragraphs and table rows whose spans slice to their text;
corrupt and encrypted files end ``dead`` with their failure kind."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant
from tests.support.server import write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("docling")
    config = write_config(
        folder,
        workers={"in_process": ["docling_worker"], "concurrency": 1},
        docling={"timeout_s": 120, "mem_ceiling_mb": 4096},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _ingest(
    tenant: Tenant, rel: str, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    path = CORPUS / rel
    body = {
        "format": path.parent.name,
        "name": path.name,
        "contentBase64": base64.b64encode(path.read_bytes()).decode(),
    }
    if options is not None:
        body["options"] = options
    resp = await tenant.client.post("/v1/ingest", json=body)
    assert resp.status_code == 202, resp.text
    return await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=90)


async def _nodes(tenant: Tenant, source_id: str, label: str) -> list[dict[str, Any]]:
    page = await tenant.client.get(
        "/v1/nodes", params={"sourceId": source_id, "label": label, "limit": 1000}
    )
    return list(page.json()["nodes"])


@pytest.mark.parametrize(
    ("rel", "label", "text"),
    [
        ("docx/word_sample.docx", "SECTION", "Let’s swim!"),
        ("pptx/powerpoint_sample.pptx", "SECTION", "Test Table Slide"),
        ("html/table_06.html", "TABLE_ROW", None),
        ("pdf/simple1.pdf", "PARAGRAPH", None),
    ],
)
async def test_documents_read_back_with_their_text(
    tenant: Tenant, rel: str, label: str, text: str | None
) -> None:
    job = await _ingest(tenant, rel)
    assert job["state"] == "completed", job
    nodes = await _nodes(tenant, str(job["sourceId"]), label)
    assert nodes
    for node in nodes:
        (span,) = node["provenance"]["spans"]
        props = node["properties"]
        if label == "SECTION":
            assert span["text"] == props["title"]
        elif label == "PARAGRAPH":
            assert span["text"] == props["text"]
        else:
            cells = [v or "" for k, v in props.items() if k != "row"]
            assert span["text"] == "\t".join(cells)
    if text is not None:
        assert text in [n["properties"]["title"] for n in nodes]


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("docx/testWORD_truncated.docx", "corrupt_input"),
        ("docx/testWORD_protected_passtika.docx", "unsupported_feature: encrypted"),
        ("pdf/aes-256.pdf", "unsupported_feature: encrypted"),
        ("pdf/testOCR.pdf", "unsupported_feature: ocr_required"),  # with options.ocr = off
    ],
)
async def test_bad_documents_end_dead_with_their_kind(
    tenant: Tenant, rel: str, reason: str
) -> None:
    job = await _ingest(tenant, rel, {"ocr": "off"} if "OCR" in rel else None)
    assert job["state"] == "dead" and str(job["failureReason"]).startswith(reason), job
    assert job["attempts"] == 1  # permanent kinds are not retried


async def test_a_large_document_streams_as_partials(tenant: Tenant) -> None:
    paragraphs = 20_000
    body = "".join(
        f"<p>Paragraph {i}: the quick brown fox jumps over the lazy dog, "
        f"again and again, for the {i}th time in this long report.</p>\n"
        for i in range(paragraphs)
    )
    html = f"<html><body><h1>Report</h1>\n{body}</body></html>".encode()
    resp = await tenant.client.post(
        "/v1/ingest",
        json={
            "format": "html",
            "name": "big-report.html",
            "contentBase64": base64.b64encode(html).decode(),
        },
    )
    assert resp.status_code == 202, resp.text
    job = await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=120)
    assert job["state"] == "completed", job
    partials = [e["detail"] for e in job["events"] if e["transition"] == "partial"]
    assert len(partials) >= 2  # over 2 MiB of text: at least two parts
    assert job["stats"]["paragraphs"] == paragraphs
    source = (await tenant.client.get(f"/v1/sources/{job['sourceId']}")).json()
    (version,) = source["versions"]
    assert version["canonicalTextHash"] is not None
    (section,) = await _nodes(tenant, str(job["sourceId"]), "SECTION")
    edges = (
        await tenant.client.get(f"/v1/nodes/{section['nodeId']}/edges", params={"direction": "out"})
    ).json()["edges"]
    assert len([e for e in edges if e["type"] == "CONTAINS"]) == paragraphs
