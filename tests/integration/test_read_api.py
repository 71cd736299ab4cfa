"""The provenance read API (docs/rest-api.md) against a real server: shapes, scopes, errors."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.support.server import ServerProcess

pytestmark = pytest.mark.anyio


async def _ingest(
    client: httpx.AsyncClient, records: object, name: str, **options: object
) -> dict[str, object]:
    resp = await client.post(
        "/v1/ingest",
        json={"format": "json", "name": name, "content": json.dumps(records), "options": options},
    )
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def test_unauthenticated(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        for headers in ({}, {"x-api-key": "telha_wrong"}):
            for method, path in [
                ("GET", f"/v1/nodes/{uuid.uuid4()}"),
                ("POST", "/v1/ingest"),
                ("GET", "/v1/nodes"),
            ]:
                resp = await anon.request(method, path, headers=headers)
                assert resp.status_code == 401
                assert resp.json()["error"]["code"] == "UNAUTHENTICATED"
        assert (await anon.get("/healthz")).status_code == 200
        assert (await anon.get("/readyz")).json()["status"] == "ready"


async def test_scope_isolation(server: ServerProcess, client: httpx.AsyncClient) -> None:
    created = await _ingest(client, [{"secret": "a"}], "private.json")
    node_id, src, tx = created["nodeIds"][0], created["sourceId"], created["sourceVersionTx"]  # type: ignore[index]
    # Same tenant, other organization: a different scope.
    other_key = server.create_key("tenant-shared", "org-b")
    same_tenant_key = server.create_key("tenant-shared", "org-a")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": other_key}
    ) as other:
        for path in [
            f"/v1/nodes/{node_id}",
            f"/v1/nodes/{node_id}/edges",
            f"/v1/sources/{src}",
            f"/v1/sources/{src}/versions/{tx}/text",
            f"/v1/sources/{src}/versions/{tx}/spans",
        ]:
            resp = await other.get(path)
            assert resp.status_code == 404, path
            assert resp.json()["error"]["code"] == "NOT_FOUND"
        assert (await other.get("/v1/nodes")).json() == {"nodes": [], "nextCursor": None}
        # The same name in another scope is another source's first version, not a dedup.
        again = await other.post(
            "/v1/ingest",
            json={"format": "json", "name": "private.json", "content": '[{"secret": "a"}]'},
        )
        assert again.status_code == 201
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": same_tenant_key}
    ) as sibling:
        assert (await sibling.get(f"/v1/nodes/{node_id}")).status_code == 404


async def test_text_slices(client: httpx.AsyncClient) -> None:
    created = await _ingest(client, [{"w": "héllo"}], "slice.json")
    base = f"/v1/sources/{created['sourceId']}/versions/{created['sourceVersionTx']}/text"
    whole = (await client.get(base)).content
    assert whole == '{"w":"héllo"}'.encode()
    assert (await client.get(base, params={"start": 6, "end": 12})).content == "héllo".encode()
    assert (await client.get(base, params={"start": 6})).content == whole[6:]
    assert (await client.get(base, params={"end": 0})).content == b""
    e_acute = whole.index("é".encode())
    # An end past the text's end reads what exists; X-Text-End says where it really ends,
    # in the units asked for (the text is 14 bytes, 13 characters).
    past = await client.get(base, params={"start": 6, "end": len(whole) + 50})
    assert past.status_code == 200 and past.content == whole[6:]
    assert past.headers["x-text-end"] == str(len(whole))
    chars = await client.get(base, params={"start": 6, "end": 500, "units": "codepoint"})
    assert chars.content == whole.decode()[6:].encode()
    assert chars.headers["x-text-end"] == str(len(whole.decode()))
    wide = await client.get(base, params={"start": 0, "end": 500, "units": "utf16"})
    assert wide.content == whole and wide.headers["x-text-end"] == str(len(whole.decode()))
    inside = await client.get(base, params={"start": 2, "end": 4})
    assert inside.headers["x-text-end"] == "4"
    for params in [
        {"start": len(whole) + 1, "end": len(whole) + 5},  # a start past the end: 400
        {"start": 500, "units": "codepoint"},
        {"start": 5, "end": 2},
        {"start": e_acute + 1},
        {"end": e_acute + 1},
        {"start": "x"},
        {"start": -1},
    ]:
        resp = await client.get(base, params=params)
        assert resp.status_code == 400, params
        assert resp.json()["error"]["code"] == "INVALID_REQUEST"
    assert (
        await client.get(f"/v1/sources/{created['sourceId']}/versions/1/text")
    ).status_code == 404
    assert (await client.get(f"/v1/sources/{uuid.uuid4()}")).status_code == 404
    assert (await client.get("/v1/sources/not-a-uuid")).status_code == 404


async def test_spans_in_document_order(client: httpx.AsyncClient) -> None:
    created = await _ingest(client, [{"i": i} for i in range(5)], "spans.json")
    spans = (
        await client.get(
            f"/v1/sources/{created['sourceId']}/versions/{created['sourceVersionTx']}/spans"
        )
    ).json()["spans"]
    assert [s["start"] for s in spans] == sorted(s["start"] for s in spans)
    assert [s["linkedNodes"] for s in spans] == [[n] for n in created["nodeIds"]]  # type: ignore[union-attr]
    text = (
        await client.get(
            f"/v1/sources/{created['sourceId']}/versions/{created['sourceVersionTx']}/text"
        )
    ).content
    assert [text[s["start"] : s["end"]] for s in spans] == [
        f'{{"i":{i}}}'.encode() for i in range(5)
    ]


async def test_listing_pages_and_filters(client: httpx.AsyncClient) -> None:
    a = await _ingest(client, [{"i": i} for i in range(7)], "alpha.json")
    b = await _ingest(client, [{"j": 1, "kids": [{"k": 1}]}], "beta.json")
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/nodes", params=params)).json()
        assert len(page["nodes"]) <= 3
        seen += [n["nodeId"] for n in page["nodes"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == sorted(seen) and len(seen) == 9 == len(set(seen))
    alpha = (await client.get("/v1/nodes", params={"label": "ALPHA"})).json()["nodes"]
    assert [n["nodeId"] for n in alpha] == a["nodeIds"]
    by_source = (await client.get("/v1/nodes", params={"sourceId": b["sourceId"]})).json()["nodes"]
    assert [n["nodeId"] for n in by_source] == b["nodeIds"]
    both = (
        await client.get("/v1/nodes", params={"sourceId": b["sourceId"], "label": "KIDS"})
    ).json()["nodes"]
    assert [n["labels"] for n in both] == [["KIDS"]]
    for params in [{"limit": 0}, {"limit": 1001}, {"limit": "ten"}, {"cursor": "!!"}]:
        resp = await client.get("/v1/nodes", params=params)
        assert resp.status_code == 400, params


async def test_as_of(client: httpx.AsyncClient) -> None:
    created = await _ingest(client, {"x": 1}, "asof.json")
    node, tx = created["nodeIds"][0], created["sourceVersionTx"]  # type: ignore[index]
    assert (await client.get(f"/v1/nodes/{node}", params={"asOf": tx})).status_code == 200
    assert (await client.get(f"/v1/nodes/{node}", params={"asOf": tx - 1})).status_code == 404  # type: ignore[operator]
    assert (await client.get(f"/v1/nodes/{node}", params={"asOf": "yesterday"})).status_code == 400
    assert (
        await client.get(f"/v1/nodes/{node}/edges", params={"direction": "sideways"})
    ).status_code == 400


async def test_openapi_describes_every_route(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        doc = (await anon.get("/openapi.json")).json()
        assert doc["openapi"].startswith("3.")
        assert set(doc["paths"]) == {
            "/v1/ingest",
            "/v1/ingest/{jobId}",
            "/v1/sources",
            "/v1/ingest/{jobId}/cancel",
            "/v1/ingest/{jobId}/events",
            "/v1/sources/{sourceId}",
            "/v1/sources/{sourceId}/erase",
            "/v1/sources/{sourceId}/diff",
            "/v1/sources/{sourceId}/versions/{tx}/text",
            "/v1/sources/{sourceId}/versions/{tx}/spans",
            "/v1/sources/{sourceId}/versions/{tx}/chunks",
            "/v1/sources/{sourceId}/versions/{tx}/pages/{n}.png",
            "/v1/usage",
            "/v1/nodes",
            "/v1/nodes/{nodeId}",
            "/v1/nodes/{nodeId}/edges",
            "/v1/search",
            "/v1/locate",
            "/v1/reproject",
            "/v1/connectors",
            "/v1/connectors/{connectorId}",
            "/v1/connectors/{connectorId}/runs",
            "/healthz",
            "/readyz",
            "/metrics",
            "/openapi.json",
        }
        for name in (
            "IngestApplied",
            "NodeOut",
            "ErrorBody",
            "SourceOut",
            "SpanList",
            "EdgeList",
            "NodeList",
            "SourceList",
            "JobList",
            "ErasureOut",
            "SearchResult",
            "LocatedOut",
            "ConnectorOut",
            "RunList",
            "ConnectorSourceOut",
        ):
            assert name in doc["components"]["schemas"]
        erase = doc["paths"]["/v1/sources/{sourceId}/erase"]["post"]
        assert erase["requestBody"]["content"]["application/json"]["schema"]["required"] == [
            "reason"
        ]
        assert "410" in doc["paths"]["/v1/ingest"]["post"]["responses"]
        assert (
            "410" in doc["paths"]["/v1/sources/{sourceId}/versions/{tx}/text"]["get"]["responses"]
        )
        assert "AmbiguityOut" in doc["components"]["schemas"]
        ingest = doc["paths"]["/v1/ingest"]["post"]
        assert set(ingest["requestBody"]["content"]) == {"application/json", "multipart/form-data"}
        assert {"408", "413", "503"} <= set(ingest["responses"])
        missing = await anon.get("/v1/nothing-here")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
        wrong_method = await anon.delete("/v1/ingest")
        assert wrong_method.status_code == 405 and "error" in wrong_method.json()


async def test_integer_and_id_parameters_are_strict(client: httpx.AsyncClient) -> None:
    created = await _ingest(client, {"x": 1}, "strict.json")
    src = created["sourceId"]
    for tx in ["99999999999999999999999", "1_000", " 5", "-1", "١٢"]:
        resp = await client.get(f"/v1/sources/{src}/versions/{tx}/text")
        assert resp.status_code == 400, tx
        assert resp.json()["error"]["code"] == "INVALID_REQUEST"
    node = created["nodeIds"][0]  # type: ignore[index]
    assert (
        await client.get(f"/v1/nodes/{node}", params={"asOf": "99999999999999999999999"})
    ).status_code == 400
    resp = await client.get("/v1/nodes", params={"sourceId": "zzz"})
    assert resp.status_code == 400 and "sourceId" in resp.json()["error"]["message"]


async def test_metrics(server: ServerProcess, client: httpx.AsyncClient) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        before = (await anon.get("/metrics")).text
    await _ingest(client, {"m": 1}, "metrics.json")
    await client.post(
        "/v1/ingest", json={"format": "json", "name": "metrics.json", "content": '{"m": 1}'}
    )
    await client.post("/v1/ingest", json={"format": "json", "name": "bad.json", "content": "[1]"})
    await client.post("/v1/ingest", json={"format": "text", "name": "m.txt", "content": "m"})
    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        resp = await anon.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")

    def value(text: str, series: str) -> float:
        lines = [line for line in text.splitlines() if line.startswith(series + " ")]
        return float(lines[0].split()[-1]) if lines else 0.0

    for fmt, outcome in [
        ("json", "created"),
        ("json", "deduplicated"),
        ("json", "error"),
        ("text", "enqueued"),
    ]:
        series = f'telha_ingest_requests_total{{format="{fmt}",outcome="{outcome}"}}'
        assert value(resp.text, series) >= value(before, series) + 1, outcome
    assert "telha_ingest_seconds_bucket" in resp.text
