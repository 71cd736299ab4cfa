"""The REST front of a service wired as ``telha serve`` wires it
(:func:`telha.service.wiring.run_service`), in-process on real 127.0.0.1 sockets, a real SQLite
store and no workers. Fast checks of the REST contract's edges: authentication, ingest
statuses, job status, scoping, the slice API's bad ranges and the OpenAPI document."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.server import write_config

pytestmark = pytest.mark.anyio


@dataclass
class Api:
    """A client of the server for scope A, an API key of scope B, and the server's URL."""

    client: httpx.AsyncClient
    other_key: str
    base_url: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    config = write_config(tmp_path_factory.mktemp("rest"), workers={"in_process": []})
    with InProcessServer(config) as srv:
        yield srv
        assert srv.stop() == 0


@pytest.fixture
async def api(server: InProcessServer) -> AsyncIterator[Api]:
    """Two fresh scopes of the module's server (tests never see each other's rows)."""
    run = uuid.uuid4()
    keys = [server.create_key(f"{t}-{run}", "org") for t in ("tenant-a", "tenant-b")]
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": keys[0]}, timeout=30
    ) as client:
        yield Api(client, keys[1], server.base_url)


def assert_error(resp: httpx.Response, status: int, code: str) -> None:
    """The one error shape: exactly ``{"error": {"code", "message"}}``, JSON."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code and body["error"]["message"]


RECORDS = json.dumps([{"title": "Supplier delay", "severity": 7}, {"title": "Café", "n": 1}])


async def test_missing_and_unknown_keys_answer_401(api: Api) -> None:
    for headers in ({"x-api-key": ""}, {"x-api-key": "telha_not-a-key"}):
        for method, url in (("GET", "/v1/nodes"), ("POST", "/v1/ingest"), ("GET", "/v1/ingest/x")):
            resp = await api.client.request(method, url, headers=headers, json={})
            assert_error(resp, 401, "UNAUTHENTICATED")
    no_header = httpx.AsyncClient(base_url=api.base_url)
    async with no_header:
        assert_error(await no_header.get("/v1/nodes"), 401, "UNAUTHENTICATED")
        # Unauthenticated routes stay open.
        assert (await no_header.get("/healthz")).json() == {"status": "ok"}
        assert (await no_header.get("/readyz")).json() == {"status": "ready", "formats": []}


async def test_json_ingest_201_then_deduplicated_200(api: Api) -> None:
    body = {"format": "json", "name": "risks-2026-07.json", "content": RECORDS}
    first = await api.client.post("/v1/ingest", json=body)
    assert first.status_code == 201, first.text
    made = first.json()
    assert len(made["nodeIds"]) == 2 and made["edgeIds"] == []
    assert isinstance(made["sourceVersionTx"], int)
    again = await api.client.post("/v1/ingest", json=body)
    assert again.status_code == 200, again.text
    assert again.json() == {"deduplicated": True, "sourceId": made["sourceId"]}
    source = (await api.client.get(f"/v1/sources/{made['sourceId']}")).json()
    assert [v["sourceVersionTx"] for v in source["versions"]] == [made["sourceVersionTx"]]
    node = (await api.client.get(f"/v1/nodes/{made['nodeIds'][1]}")).json()
    assert node["labels"] == ["RISKS_2026_07"] and node["properties"]["title"] == "Café"
    [span] = node["provenance"]["spans"]
    assert json.loads(span["text"]) == {"title": "Café", "n": 1}
    # The same bytes, another scope: new there.
    other = await api.client.post("/v1/ingest", json=body, headers={"x-api-key": api.other_key})
    assert other.status_code == 201, other.text


async def test_worker_format_202_job_status_and_scoping(api: Api) -> None:
    body = {"format": "markdown", "name": "notes.md", "content": "# Notes\n\nFirst paragraph."}
    posted = await api.client.post("/v1/ingest", json=body)
    assert posted.status_code == 202, posted.text
    job = posted.json()
    assert job["deduplicated"] is False and job["statusUrl"] == f"/v1/ingest/{job['jobId']}"
    status = await api.client.get(job["statusUrl"])
    assert status.status_code == 200, status.text
    got = status.json()
    assert (got["jobId"], got["sourceId"], got["state"], got["attempts"]) == (
        job["jobId"], job["sourceId"], "pending", 0,
    )  # fmt: skip
    assert got["kind"] == "ingest:markdown"
    assert [e["transition"] for e in got["events"]] == ["enqueued"]
    # A retried POST while the job is pending: the same job, nothing new.
    retried = await api.client.post("/v1/ingest", json=body)
    assert retried.status_code == 200, retried.text
    assert retried.json()["deduplicated"] is True and retried.json()["jobId"] == job["jobId"]
    # Another scope cannot see the job, nor the source: 404, never 403.
    other = {"x-api-key": api.other_key}
    assert_error(await api.client.get(job["statusUrl"], headers=other), 404, "NOT_FOUND")
    assert_error(
        await api.client.get(f"/v1/sources/{job['sourceId']}", headers=other), 404, "NOT_FOUND"
    )
    assert_error(await api.client.get("/v1/ingest/not-a-uuid"), 404, "NOT_FOUND")
    assert_error(await api.client.get("/v1/no-such-route"), 404, "NOT_FOUND")


async def test_text_slices_and_bad_ranges(api: Api) -> None:
    body = {"format": "json", "name": "slices.json", "content": '[{"w": "é"}]'}
    made = (await api.client.post("/v1/ingest", json=body)).json()
    url = f"/v1/sources/{made['sourceId']}/versions/{made['sourceVersionTx']}/text"
    whole = await api.client.get(url)
    assert whole.status_code == 200 and whole.headers["content-type"].startswith("text/plain")
    text = whole.content
    assert text == '{"w":"é"}'.encode()
    inside = text.index("é".encode()) + 1  # the second byte of "é"
    sliced = await api.client.get(url, params={"start": 1, "end": 4})
    assert sliced.status_code == 200 and sliced.content == text[1:4]
    past = await api.client.get(url, params={"start": 1, "end": len(text) + 1})
    assert past.status_code == 200 and past.content == text[1:]  # what exists
    assert past.headers["x-text-end"] == str(len(text))
    for params in (
        {"start": 5, "end": 4},
        {"start": len(text) + 1},
        {"start": inside},
        {"end": inside},
        {"start": "-1"},
        {"start": "abc"},
    ):
        assert_error(await api.client.get(url, params=params), 400, "INVALID_REQUEST")
    missing = f"/v1/sources/{made['sourceId']}/versions/{made['sourceVersionTx'] + 1}/text"
    assert_error(await api.client.get(missing), 404, "NOT_FOUND")


async def test_openapi_document(api: Api) -> None:
    resp = await api.client.get("/openapi.json", headers={"x-api-key": ""})
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["openapi"].startswith("3.")
    for path in (
        "/v1/ingest",
        "/v1/ingest/{jobId}",
        "/v1/sources/{sourceId}",
        "/v1/sources/{sourceId}/versions/{tx}/text",
        "/v1/nodes",
        "/v1/nodes/{nodeId}",
        "/v1/nodes/{nodeId}/edges",
    ):
        assert path in doc["paths"], sorted(doc["paths"])
    assert {"201", "202", "200"} <= set(doc["paths"]["/v1/ingest"]["post"]["responses"])
