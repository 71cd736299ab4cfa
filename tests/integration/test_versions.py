"""Versions that supersede (docs/architecture.md, "Versions and node identity") end to end
against a real server with in-process workers: the current graph is the latest version's,
unchanged nodes keep their ids, the previous graph stays readable as of its time."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("versions")
    config = write_config(
        folder, engine, workers={"in_process": ["text_worker", "tabular_worker"], "concurrency": 1}
    )
    with ServerProcess(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=60
    ) as c:
        yield c


async def _ingest(client: httpx.AsyncClient, fmt: str, name: str, content: str) -> dict[str, Any]:
    resp = await client.post("/v1/ingest", json={"format": fmt, "name": name, "content": content})
    assert resp.status_code in (201, 202), resp.text
    body = dict(resp.json())
    if resp.status_code == 202:
        job = await wait_job(client, body["jobId"])
        assert job["state"] == "completed", job
        body["job"] = job
    return body


async def _nodes(client: httpx.AsyncClient, source_id: str, **params: Any) -> list[dict[str, Any]]:
    resp = await client.get("/v1/nodes", params={"sourceId": source_id, "limit": 1000, **params})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["nodes"])


def _by_label(nodes: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        out.setdefault(node["labels"][0], []).append(node)
    return out


async def _text(client: httpx.AsyncClient, node: dict[str, Any]) -> str:
    full = (await client.get(f"/v1/nodes/{node['nodeId']}")).json()
    return "".join(s["text"] for s in full["provenance"]["spans"])


async def test_markdown_edit_supersedes_and_keeps_ids(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(
        client, "markdown", "notes.md", "# Title\n\nAlpha paragraph.\n\nBeta paragraph.\n"
    )
    src = v1["sourceId"]
    first = _by_label(await _nodes(client, src))
    first_texts = {p["nodeId"]: await _text(client, p) for p in first["PARAGRAPH"]}
    alpha_v1 = next(p for p in first["PARAGRAPH"] if "Alpha" in first_texts[p["nodeId"]])
    v2 = await _ingest(
        client, "markdown", "notes.md", "# Title\n\nAlpha paragraph.\n\nGamma paragraph.\n"
    )
    now = _by_label(await _nodes(client, src))
    assert {k: len(v) for k, v in now.items()} == {"DOCUMENT": 1, "SECTION": 1, "PARAGRAPH": 2}
    texts = {p["nodeId"]: await _text(client, p) for p in now["PARAGRAPH"]}
    assert texts[alpha_v1["nodeId"]] == "Alpha paragraph."
    assert "Gamma paragraph." in texts.values() and "Beta paragraph." not in texts.values()
    assert now["DOCUMENT"][0]["nodeId"] == first["DOCUMENT"][0]["nodeId"]
    stats = v2["job"]["stats"]
    assert (stats["nodes_added"], stats["nodes_removed"], stats["nodes_changed"]) == (1, 1, 0)
    # As of v1, the v1 graph exactly.
    versions = (await client.get(f"/v1/sources/{src}")).json()["versions"]
    v1_tx = versions[-1]["sourceVersionTx"]
    old = _by_label(await _nodes(client, src, asOf=v1_tx))
    assert {k: len(v) for k, v in old.items()} == {"DOCUMENT": 1, "SECTION": 1, "PARAGRAPH": 2}
    beta = next(p for p in old["PARAGRAPH"] if p["nodeId"] != alpha_v1["nodeId"])
    node = (await client.get(f"/v1/nodes/{beta['nodeId']}", params={"asOf": v1_tx})).json()
    assert node["provenance"]["spans"][0]["text"] == "Beta paragraph."
    assert (await client.get(f"/v1/nodes/{beta['nodeId']}")).status_code == 404


async def test_json_reingest_has_only_new_records(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "json", "r.json", '[{"a": 1}, {"a": 2}]')
    v2 = await _ingest(client, "json", "r.json", '[{"a": 1}]')
    now = await _nodes(client, v2["sourceId"])
    assert len(now) == 1 and now[0]["nodeId"] == v1["nodeIds"][0]


async def test_csv_reingest_keeps_table_and_unchanged_rows(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "csv", "t.csv", "k,v\na,1\nb,2\n")
    src = v1["sourceId"]
    first = _by_label(await _nodes(client, src))
    await _ingest(client, "csv", "t.csv", "k,v\na,1\nb,3\n")
    now = _by_label(await _nodes(client, src))
    assert len(now["TABLE"]) == 1 and len(now["TABLE_ROW"]) == 2
    assert now["TABLE"][0]["nodeId"] == first["TABLE"][0]["nodeId"]
    kept = {n["nodeId"] for n in now["TABLE_ROW"]} & {n["nodeId"] for n in first["TABLE_ROW"]}
    assert len(kept) == 1


async def test_erasing_the_current_version_brings_no_earlier_content_back(
    client: httpx.AsyncClient,
) -> None:
    v1 = await _ingest(client, "markdown", "e.md", "# T\n\nKept.\n\nOld only.\n")
    src = v1["sourceId"]
    await _ingest(client, "markdown", "e.md", "# T\n\nKept.\n\nNew only.\n")
    versions = (await client.get(f"/v1/sources/{src}")).json()["versions"]
    v1_tx, v2_tx = versions[1]["sourceVersionTx"], versions[0]["sourceVersionTx"]
    resp = await client.post(
        f"/v1/sources/{src}/erase", json={"reason": "test", "versionTx": v2_tx}
    )
    assert resp.status_code == 200, resp.text
    assert await _nodes(client, src) == []  # nothing of v1 is current again
    old = _by_label(await _nodes(client, src, asOf=v1_tx))
    assert {k: len(v) for k, v in old.items()} == {"DOCUMENT": 1, "SECTION": 1, "PARAGRAPH": 2}
