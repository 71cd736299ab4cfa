"""Messy files through ``telha serve`` on both engines (docs/formats.md, "Messy input"): a
lone-CR CSV, a TSV with quotes, NUL in cells, legacy 8-bit e-mail headers and an unknown body
charset, nested markdown, an empty DOCX; and the classification rule end to end: an
input-caused exception is ``dead`` after one attempt, a service hiccup is retried."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.server import settled_job, write_config

pytestmark = pytest.mark.anyio

MODULES = ["text_worker", "tabular_worker", "email_worker", "docling_worker",
           "tests.support.raising_worker"]  # fmt: skip


@pytest.fixture(scope="module")
def srv(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp(f"messy-{engine}")
    config = write_config(
        folder, engine,
        workers={"in_process": MODULES, "concurrency": 1, "processes": 1},
        jobs={"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_s": 0.05},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def c(srv: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    key = srv.create_key("acme", "messy")
    async with httpx.AsyncClient(base_url=srv.base_url, headers={"x-api-key": key}) as client:
        yield client


async def _done(c: httpx.AsyncClient, fmt: str, name: str, raw: bytes) -> dict[str, Any]:
    import base64

    body = {"format": fmt, "name": name, "contentBase64": base64.b64encode(raw).decode()}
    job = await settled_job(c, body, within_s=120)
    assert job["state"] == "completed", job
    return job


async def _nodes(c: httpx.AsyncClient, source: str, label: str) -> list[dict[str, Any]]:
    page = await c.get("/v1/nodes", params={"sourceId": source, "label": label, "limit": 100})
    return list(page.json()["nodes"])


async def test_tables_lone_cr_tsv_quotes_and_nul(c: httpx.AsyncClient) -> None:
    job = await _done(c, "csv", "mac.csv", b"name,qty\rWid\x00get,3\rGadget,4\r")
    assert job["stats"]["line_ends"] == "cr" and job["stats"]["nul_chars"] == 1
    rows = await _nodes(c, job["sourceId"], "TABLE_ROW")
    assert sorted(r["properties"]["name"] for r in rows) == ["Gadget", "Widget"]
    job = await _done(c, "tsv", "q.tsv", b'id\tnote\n1\t"Best" seller\n2\t5\'9" tall\n')
    rows = await _nodes(c, job["sourceId"], "TABLE_ROW")
    assert sorted(r["properties"]["note"] for r in rows) == ['"Best" seller', "5'9\" tall"]


async def test_email_legacy_headers_and_unknown_charset(c: httpx.AsyncClient) -> None:
    raw = (
        "From: Jos\xe9 <jose@example.com>\nSubject: R\xe9sum\xe9\n"
        "Content-Type: text/plain; charset=iso-8859-1\n\nCaf\xe9\n"
    ).encode("latin-1")
    job = await _done(c, "eml", "latin.eml", raw)
    (message,) = await _nodes(c, job["sourceId"], "MESSAGE")
    assert message["properties"]["subject"] == "Résumé"
    assert job["stats"]["warnings"]
    raw = b"From: a@example.com\nSubject: x\nContent-Type: text/plain; charset=uft-8\n\nok\n"
    job = await _done(c, "eml", "label.eml", raw)
    assert job["attempts"] == 1 and "uft-8" in job["stats"]["warnings"][0]["detail"]


async def test_markdown_nesting_and_empty_docx(c: httpx.AsyncClient) -> None:
    job = await _done(c, "markdown", "n.md", b"# Top\n\n## Sub\n\ntext\n")
    (top,) = [
        s for s in await _nodes(c, job["sourceId"], "SECTION") if s["properties"]["level"] == 1
    ]
    edges = (await c.get(f"/v1/nodes/{top['nodeId']}/edges", params={"direction": "out"})).json()
    assert len(edges["edges"]) == 1  # the level-2 section hangs off the level-1 one
    job = await _done(c, "docx", "empty.docx", b"")
    assert job["stats"]["empty"] is True
    (doc,) = await _nodes(c, job["sourceId"], "DOCUMENT")
    assert doc["properties"]["name"] == "empty.docx"


@pytest.mark.parametrize(
    ("name", "reason"),
    [("lookup.py", "corrupt_input: LookupError: unknown encoding: uft-8"),
     ("recursion.py", "corrupt_input: RecursionError: maximum recursion depth")],
)  # fmt: skip
async def test_input_caused_exceptions_die_in_one_attempt(
    c: httpx.AsyncClient, name: str, reason: str
) -> None:
    job = await settled_job(c, {"format": "code", "name": name, "content": "x"}, within_s=60)
    assert job["state"] == "dead" and job["attempts"] == 1, job
    assert job["failureReason"].startswith(reason)


async def test_a_service_hiccup_is_retried(c: httpx.AsyncClient) -> None:
    job = await settled_job(c, {"format": "code", "name": "hiccup.py", "content": "x"}, within_s=60)
    assert job["state"] == "completed" and job["attempts"] == 2, job
