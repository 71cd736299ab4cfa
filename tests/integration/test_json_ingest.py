"""POST /v1/ingest format=json against a real server: the documented examples and every error."""

from __future__ import annotations

import base64
import json
import unicodedata
from pathlib import Path

import httpx
import pytest

from tests.conftest import CORPUS

pytestmark = pytest.mark.anyio


def _body(content: str, name: str = "risks-2026-07.json", **extra: object) -> dict[str, object]:
    return {"format": "json", "name": name, "content": content, **extra}


async def _error(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return str(body["error"]["message"])


async def test_spec_worked_example_201_then_dedup_200(client: httpx.AsyncClient) -> None:
    content = json.dumps(
        [{"label": "RISK", "title": "Supplier delay", "severity": 7, "status": "open"}]
    )
    first = await client.post("/v1/ingest", json=_body(content))
    assert first.status_code == 201, first.text
    created = first.json()
    assert created["deduplicated"] is False
    assert set(created) == {"deduplicated", "sourceId", "sourceVersionTx", "nodeIds", "edgeIds"}
    assert len(created["nodeIds"]) == 1 and created["edgeIds"] == []

    again = await client.post("/v1/ingest", json=_body(content))
    assert again.status_code == 200
    assert again.json() == {"deduplicated": True, "sourceId": created["sourceId"]}

    node = (await client.get(f"/v1/nodes/{created['nodeIds'][0]}")).json()
    assert node["labels"] == ["RISKS_2026_07"]
    # A record's own field named "label" is an ordinary property (docs/rest-api.md).
    assert node["properties"] == {
        "label": "RISK",
        "title": "Supplier delay",
        "severity": 7,
        "status": "open",
    }
    assert node["validTime"] == {"from": None, "to": None}
    assert node["txTime"] == {"from": created["sourceVersionTx"], "to": None}
    [span] = node["provenance"]["spans"]
    assert span["text"] == '{"label":"RISK","title":"Supplier delay","severity":7,"status":"open"}'
    assert (span["start"], span["end"]) == (0, len(span["text"].encode()))

    source = (await client.get(f"/v1/sources/{created['sourceId']}")).json()
    assert len(source["versions"]) == 1  # the dedup wrote nothing
    version = source["versions"][0]
    assert version["worker"] == "core:json-bypass" and version["jobId"] is None
    assert version["size"] == len(content.encode())


async def test_spec_child_example(client: httpx.AsyncClient) -> None:
    content = '{"title": "MSA", "parties": [{"name": "Acme"}, {"name": "Globex"}]}'
    resp = await client.post(
        "/v1/ingest",
        json=_body(
            content, name="contracts.json", options={"label": "CONTRACT", "nested": "child"}
        ),
    )
    assert resp.status_code == 201, resp.text
    created = resp.json()
    contract_id, *party_ids = created["nodeIds"]
    assert len(party_ids) == 2 and len(created["edgeIds"]) == 2
    assert (await client.get(f"/v1/nodes/{contract_id}")).json()["labels"] == ["CONTRACT"]
    parties = [(await client.get(f"/v1/nodes/{p}")).json() for p in party_ids]
    assert [p["labels"] for p in parties] == [["PARTIES"], ["PARTIES"]]
    assert [p["properties"]["name"] for p in parties] == ["Acme", "Globex"]
    # Children share their record's span.
    assert parties[0]["provenance"]["spans"][0]["text"] == json.dumps(
        json.loads(content), separators=(",", ":")
    )

    out = (await client.get(f"/v1/nodes/{contract_id}/edges", params={"direction": "out"})).json()[
        "edges"
    ]
    # Edges come in edge id order; their ids are deterministic (docs/architecture.md).
    out.sort(key=lambda e: e["properties"]["ord"])
    assert [(e["type"], e["to"], e["properties"]) for e in out] == [
        ("HAS_PARTIES", party_ids[0], {"ord": 0}),
        ("HAS_PARTIES", party_ids[1], {"ord": 1}),
    ]
    inbound = (
        await client.get(f"/v1/nodes/{party_ids[1]}/edges", params={"direction": "in"})
    ).json()
    assert [e["from"] for e in inbound["edges"]] == [contract_id]
    assert (
        await client.get(f"/v1/nodes/{contract_id}/edges", params={"direction": "in"})
    ).json() == {"edges": []}


async def test_flatten_nested_objects_and_arrays_of_objects(client: httpx.AsyncClient) -> None:
    content = json.dumps(
        {
            "id": 1,
            "homeAddress": {"city": "Porto", "geo": {"lat": 41.1}},
            "tags": ["a", "b"],
            "items": [{"sku": "x"}],
        }
    )
    created = (await client.post("/v1/ingest", json=_body(content, name="orders.json"))).json()
    record_id, item_id = created["nodeIds"]
    record = (await client.get(f"/v1/nodes/{record_id}")).json()
    assert record["labels"] == ["ORDERS"]
    assert record["properties"] == {
        "id": 1,
        "homeAddress.city": "Porto",
        "homeAddress.geo.lat": 41.1,
        "tags": ["a", "b"],
    }
    item = (await client.get(f"/v1/nodes/{item_id}")).json()
    assert item["labels"] == ["ITEMS"] and item["properties"] == {"sku": "x"}
    [edge] = (await client.get(f"/v1/nodes/{record_id}/edges")).json()["edges"]
    assert edge["type"] == "HAS_ITEMS" and edge["properties"] == {"ord": 0}


async def test_node_ids_in_creation_order_depth_first(client: httpx.AsyncClient) -> None:
    content = json.dumps([{"n": 0, "kids": [{"k": "a", "sub": {"z": 1}}, {"k": "b"}]}, {"n": 1}])
    created = (
        await client.post(
            "/v1/ingest", json=_body(content, name="tree.json", options={"nested": "child"})
        )
    ).json()
    nodes = [(await client.get(f"/v1/nodes/{n}")).json() for n in created["nodeIds"]]
    assert [(n["labels"][0], n["properties"]) for n in nodes] == [
        ("TREE", {"n": 0}),
        ("KIDS", {"k": "a"}),
        ("SUB", {"z": 1}),
        ("KIDS", {"k": "b"}),
        ("TREE", {"n": 1}),
    ]
    spans = (
        await client.get(
            f"/v1/sources/{created['sourceId']}/versions/{created['sourceVersionTx']}/spans"
        )
    ).json()["spans"]
    assert [len(s["linkedNodes"]) for s in spans] == [4, 1]
    assert all(s["kind"] == "body" for s in spans)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("42", "bare scalar"),
        ('"text"', "bare string"),
        ("[1, 2, 3]", "array of scalars"),
        ('[{"a": 1}, 2]', "mixed array"),
        ("[]", "empty top-level array"),
        ('{"a": 1', "malformed"),
        ('{"a": [{"b": 1}, 2]}', "array mixing objects with scalars inside a record"),
        ('{"a.b": 1, "a": {"b": 2}}', "literal dotted key then nested"),
        ('{"a": {"b": 2}, "a.b": 1}', "nested then literal dotted key"),
        ('{"a": [[{"b": 1}]]}', "objects inside an array of arrays"),
        ('{"x": "\\uDFAA"}', "lone surrogate escape"),
    ],
)
async def test_invalid_content(client: httpx.AsyncClient, content: str, why: str) -> None:
    resp = await client.post("/v1/ingest", json=_body(content, name=f"bad-{why}.json"))
    await _error(resp, 400, "INVALID_CONTENT")


@pytest.mark.parametrize("content", ["", "  \n\t", "\ufeff \r\n"])
async def test_empty_content_completes_with_stats_empty(
    client: httpx.AsyncClient, content: str
) -> None:
    """Empty is empty in every format (docs/formats.md, "Empty input"): no bytes, or only
    whitespace after an optional BOM, make a version holding only its DOCUMENT root, with an
    empty text and ``stats.empty`` — not a malformed-JSON refusal."""
    name = f"empty-{len(content)}-{content.startswith(chr(0xFEFF))}.json"
    resp = await client.post("/v1/ingest", json=_body(content, name=name))
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert created["stats"] == {"empty": True}
    [root] = created["nodeIds"]
    node = (await client.get(f"/v1/nodes/{root}")).json()
    assert node["labels"] == ["DOCUMENT"]
    assert node["properties"] == {"format": "json", "name": name}
    text = await client.get(
        f"/v1/sources/{created['sourceId']}/versions/{created['sourceVersionTx']}/text"
    )
    assert text.status_code == 200 and text.content == b"", text.text
    again = await client.post("/v1/ingest", json=_body(content, name=name))
    assert again.status_code == 200 and again.json()["deduplicated"] is True


async def test_depth_limit_under_both_policies(client: httpx.AsyncClient) -> None:
    def nest(levels: int) -> dict[str, object]:
        obj: dict[str, object] = {"leaf": 1}
        for _ in range(levels - 1):
            obj = {"o": obj}
        return obj

    for policy in ("flatten", "child"):
        ok = await client.post(
            "/v1/ingest",
            json=_body(
                json.dumps(nest(8)), name=f"deep8-{policy}.json", options={"nested": policy}
            ),
        )
        assert ok.status_code == 201, ok.text
        bad = await client.post(
            "/v1/ingest",
            json=_body(
                json.dumps(nest(9)), name=f"deep9-{policy}.json", options={"nested": policy}
            ),
        )
        await _error(bad, 400, "INVALID_CONTENT")


async def test_too_many_records(client: httpx.AsyncClient) -> None:
    # The session server runs with ingest.json_max_records = 50.
    ok = await client.post(
        "/v1/ingest", json=_body(json.dumps([{"i": i} for i in range(50)]), name="fifty.json")
    )
    assert ok.status_code == 201
    bad = await client.post(
        "/v1/ingest", json=_body(json.dumps([{"i": i} for i in range(51)]), name="fiftyone.json")
    )
    assert "json_max_records" in await _error(bad, 400, "INVALID_CONTENT")


@pytest.mark.parametrize(
    "fields",
    [
        {"content": '{"a": 1}', "contentBase64": base64.b64encode(b'{"a": 1}').decode()},
        {},
        {"content": None, "contentBase64": None},
        {"contentBase64": "not base64!"},
    ],
)
async def test_content_field_rules(client: httpx.AsyncClient, fields: dict[str, object]) -> None:
    resp = await client.post("/v1/ingest", json={"format": "json", "name": "x.json", **fields})
    await _error(resp, 400, "INVALID_CONTENT")


async def test_content_base64_and_null_counts_as_absent(client: httpx.AsyncClient) -> None:
    raw = b'{"a": 1}'
    resp = await client.post(
        "/v1/ingest",
        json={
            "format": "json",
            "name": "b64.json",
            "content": None,
            "contentBase64": base64.b64encode(raw).decode(),
        },
    )
    assert resp.status_code == 201
    # Dedup compares raw bytes: the same bytes as plain content dedupe.
    again = await client.post("/v1/ingest", json=_body(raw.decode(), name="b64.json"))
    assert again.json()["deduplicated"] is True


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"format": "nope", "name": "a", "content": "x"}, "known formats"),
        ({"name": "a.json", "content": "{}"}, "format"),
        ({"format": "json", "name": "", "content": "{}"}, "name"),
        ({"format": "json", "name": "a.json", "content": "{}", "extra": 1}, "extra"),
        (
            {"format": "json", "name": "a.json", "content": "{}", "options": {"label": "lower"}},
            "label",
        ),
        (
            {"format": "json", "name": "a.json", "content": "{}", "options": {"nested": "deep"}},
            "nested",
        ),
        ({"format": "json", "name": "a.json", "content": "{}", "options": {"colour": 1}}, "colour"),
        ({"format": "json", "name": "___.json", "content": "{}"}, "options.label"),
    ],
)
async def test_invalid_request(
    client: httpx.AsyncClient, body: dict[str, object], fragment: str
) -> None:
    resp = await client.post("/v1/ingest", json=body)
    assert fragment in await _error(resp, 400, "INVALID_REQUEST")


async def test_body_not_json(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/ingest", content=b"\xff\x00 not json")
    await _error(resp, 400, "INVALID_REQUEST")


async def test_payload_too_large(client: httpx.AsyncClient) -> None:
    # The session server runs with ingest.max_body_bytes = 262144.
    big = json.dumps({"blob": "x" * 270_000})
    resp = await client.post("/v1/ingest", json=_body(big, name="big.json"))
    await _error(resp, 413, "PAYLOAD_TOO_LARGE")


async def test_new_bytes_make_a_new_version_and_old_one_stays(client: httpx.AsyncClient) -> None:
    v1 = (await client.post("/v1/ingest", json=_body('{"v": 1}', name="doc.json"))).json()
    v2 = (await client.post("/v1/ingest", json=_body('{"v": 2}', name="doc.json"))).json()
    assert v1["sourceId"] == v2["sourceId"] and v2["sourceVersionTx"] > v1["sourceVersionTx"]
    versions = (await client.get(f"/v1/sources/{v1['sourceId']}")).json()["versions"]
    assert [v["sourceVersionTx"] for v in versions] == [
        v2["sourceVersionTx"],
        v1["sourceVersionTx"],
    ]
    old = await client.get(f"/v1/sources/{v1['sourceId']}/versions/{v1['sourceVersionTx']}/text")
    assert old.text == '{"v":1}' and old.headers["content-type"] == "text/plain; charset=utf-8"
    # Going back to version 1's bytes is a change against the latest: a third version.
    v3 = await client.post("/v1/ingest", json=_body('{"v": 1}', name="doc.json"))
    assert v3.status_code == 201


async def test_nfd_input_offsets_are_bytes_into_nfc(client: httpx.AsyncClient) -> None:
    nfd = unicodedata.normalize("NFD", "Zoë Čapek")
    content = json.dumps(
        [{"name": "ascii"}, {"name": nfd, unicodedata.normalize("NFD", "ké"): "ñ"}],
        ensure_ascii=False,
    )
    created = (await client.post("/v1/ingest", json=_body(content, name="people.json"))).json()
    src, tx = created["sourceId"], created["sourceVersionTx"]
    text = (await client.get(f"/v1/sources/{src}/versions/{tx}/text")).content
    lines = text.decode().split("\n")
    assert lines[1] == '{"name":"Zoë Čapek","ké":"ñ"}'
    assert unicodedata.is_normalized("NFC", text.decode())
    node = (await client.get(f"/v1/nodes/{created['nodeIds'][1]}")).json()
    assert node["properties"] == {"name": "Zoë Čapek", "ké": "ñ"}
    [span] = node["provenance"]["spans"]
    assert span["start"] == len(lines[0].encode()) + 1
    assert span["end"] == len(text)
    assert text[span["start"] : span["end"]].decode() == span["text"] == lines[1]


async def test_corpus_json_files(client: httpx.AsyncClient) -> None:
    folder = CORPUS / "json"
    expected = {
        "n_structure_unclosed_object.json": 400,
        "n_structure_100000_opening_arrays.json": 400,
        "i_string_lone_second_surrogate.json": 400,
        "i_string_UTF-16LE_with_BOM.json": 400,
        "y_object_duplicated_key.json": 201,
        # The corpus copy is truncated (its closing "]" is missing): malformed as shipped.
        "dots_simple.json": 400,
    }
    for name, status in expected.items():
        raw = (folder / name).read_bytes()
        resp = await client.post(
            "/v1/ingest",
            json={"format": "json", "name": name, "contentBase64": base64.b64encode(raw).decode()},
        )
        assert resp.status_code == status, (name, resp.text)
        if status == 400:
            assert resp.json()["error"]["code"] == "INVALID_CONTENT"
    dup = (await client.get("/v1/nodes", params={"label": "Y_OBJECT_DUPLICATED_KEY"})).json()[
        "nodes"
    ]
    assert dup[0]["properties"] == {"a": "c"}  # the last duplicate key wins
    repaired = (folder / "dots_simple.json").read_bytes().rstrip() + b"]"
    resp = await client.post(
        "/v1/ingest",
        json={"format": "json", "name": "dots_simple.json", "content": repaired.decode()},
    )
    assert resp.status_code == 201, resp.text
    dots = (await client.get("/v1/nodes", params={"label": "DOTS_SIMPLE", "limit": 1000})).json()[
        "nodes"
    ]
    assert len(dots) == len(json.loads(repaired)) == len(resp.json()["nodeIds"])


def test_corpus_present() -> None:
    assert (CORPUS / "MANIFEST.tsv").is_file(), f"corpus not found at {CORPUS}"
    assert Path(CORPUS / "json").is_dir()


async def test_a_refused_ingest_leaves_nothing(client: httpx.AsyncClient) -> None:
    bad = await client.post(
        "/v1/ingest", json=_body('[{"ok": 1}, {"a.b": 1, "a": {"b": 2}}]', name="half.json")
    )
    await _error(bad, 400, "INVALID_CONTENT")
    assert (await client.get("/v1/nodes", params={"label": "HALF"})).json()["nodes"] == []
    from telha.domain.ids import source_id_for

    assert (await client.get(f"/v1/sources/{source_id_for('half.json')}")).status_code == 404


async def test_edge_ids_in_creation_order(client: httpx.AsyncClient) -> None:
    content = json.dumps({"kids": [{"sub": {"z": 1}}, {"k": 2}]})
    created = (
        await client.post(
            "/v1/ingest", json=_body(content, name="order.json", options={"nested": "child"})
        )
    ).json()
    root, kid0, sub, kid1 = created["nodeIds"]
    edges = [
        (await client.get(f"/v1/nodes/{n}/edges", params={"direction": "out"})).json()["edges"]
        for n in (root, kid0)
    ]
    by_id = {e["edgeId"]: (e["type"], e["from"], e["to"]) for es in edges for e in es}
    assert [by_id[e] for e in created["edgeIds"]] == [
        ("HAS_KIDS", root, kid0),
        ("HAS_SUB", kid0, sub),
        ("HAS_KIDS", root, kid1),
    ]
