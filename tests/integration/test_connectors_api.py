"""Connectors as first-class objects (docs/connectors.md): ``/v1/connectors`` over a real
server on both engines, the connector token's limits on ``POST /v1/ingest``, the
externalId lookup of ``GET /v1/sources``, and ``telha connector add|list|remove|token``."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from telha.config import load_config
from telha.domain.connectors import connector_source_id
from telha.domain.ids import source_id_for
from telha.domain.model import Scope
from telha.tokens import load_token_key, mint_connector_token
from tests.support.server import ServerProcess

pytestmark = pytest.mark.anyio


def _token(server: ServerProcess, scope: Scope, connector_id: str, key: bytes | None = None) -> str:
    cfg, _ = load_config(server.config, environ={})
    key = key or load_token_key(cfg.grpc.token_key, server.db.parent)
    return mint_connector_token(key, scope, uuid.UUID(connector_id).bytes, 3600)


@pytest.fixture
def scope() -> Scope:
    return Scope(f"tenant-{uuid.uuid4()}", "org")


@pytest.fixture
async def api(server: ServerProcess, scope: Scope) -> AsyncIterator[httpx.AsyncClient]:
    key = server.create_key(scope.tenant_id, scope.organization_id)
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield c


async def _settled(api: httpx.AsyncClient, job_id: str) -> None:
    for _ in range(600):
        state = (await api.get(f"/v1/ingest/{job_id}")).json()["state"]
        if state not in ("pending", "leased"):
            assert state == "completed", state
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"job {job_id} still {state}")


def _error(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()["error"]
    assert body["code"] == code, body
    return str(body["message"])


async def _add(api: httpx.AsyncClient, root: str = "/srv/share") -> str:
    resp = await api.post(
        "/v1/connectors",
        json={"kind": "folder", "settings": {"root": root, "include": ["**/*.txt"]},
              "every": "1h"},
    )  # fmt: skip
    assert resp.status_code == 201, resp.text
    return str(resp.json()["connectorId"])


async def test_add_list_get_remove(api: httpx.AsyncClient, server: ServerProcess) -> None:
    cid = await _add(api)
    listed = (await api.get("/v1/connectors")).json()["connectors"]
    assert [c["connectorId"] for c in listed] == [cid]
    one = (await api.get(f"/v1/connectors/{cid}")).json()
    assert one["kind"] == "folder"
    assert one["settings"] == {"root": "/srv/share", "include": ["**/*.txt"]}
    assert one["every"] == 3600
    assert one["pruneMaxFraction"] == 0.2
    # Another scope sees nothing of it.
    other = server.create_key(f"tenant-{uuid.uuid4()}", "org")
    resp = await api.get(f"/v1/connectors/{cid}", headers={"x-api-key": other})
    _error(resp, 404, "NOT_FOUND")
    resp = await api.delete(f"/v1/connectors/{cid}", headers={"x-api-key": other})
    _error(resp, 404, "NOT_FOUND")
    removed = await api.delete(f"/v1/connectors/{cid}")
    assert removed.status_code == 200 and removed.json()["removed"] is True
    assert (await api.get("/v1/connectors")).json()["connectors"] == []
    _error(await api.delete(f"/v1/connectors/{cid}"), 404, "NOT_FOUND")
    _error(await api.get("/v1/connectors/not-a-uuid"), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"kind": "ftp", "settings": {}}, "unknown connector kind"),
        ({"kind": "folder", "settings": {"root": "relative/dir"}}, "settings.root"),
        ({"kind": "folder", "settings": {}}, "settings.root"),
        ({"kind": "folder", "settings": {"root": "/x", "depth": 3}}, "unknown key"),
        ({"kind": "folder", "settings": {"root": "/x", "include": "*.txt"}}, "settings.include"),
        ({"kind": "folder", "settings": {"root": "/x"}, "every": "5s"}, "every"),
        ({"kind": "folder", "settings": {"root": "/x"}, "every": "soon"}, "every"),
        ({"kind": "folder", "settings": {"root": "/x"}, "pruneMaxFraction": 0}, "pruneMax"),
        ({"kind": "folder", "settings": {"root": "/x"}, "pruneMaxFraction": 1.5}, "pruneMax"),
        ({"kind": "folder", "settings": {"root": "/x"}, "owner": "me"}, "unknown field"),
        ({"kind": "folder", "settings": []}, "settings"),
        ([], "JSON object"),
    ],
)
async def test_bad_connectors_are_refused(api: httpx.AsyncClient, body: object, says: str) -> None:
    message = _error(await api.post("/v1/connectors", json=body), 400, "INVALID_REQUEST")
    assert says in message
    assert (await api.get("/v1/connectors")).json()["connectors"] == []


async def test_bad_json_body(api: httpx.AsyncClient) -> None:
    resp = await api.post("/v1/connectors", content=b"{nope")
    _error(resp, 400, "INVALID_REQUEST")


async def test_connector_token_ingests_only_as_its_connector(
    api: httpx.AsyncClient, server: ServerProcess, scope: Scope
) -> None:
    a, b = await _add(api), await _add(api, "/srv/other")
    token_a = _token(server, scope, a)
    as_a = {"x-connector-token": token_a}
    body = {"format": "json", "name": "notes.json", "content": '{"title": "Q3"}',
            "externalId": "notes.json", "acl": ["user:ann", "group:staff", "user:ann"],
            "marker": "etag-1"}  # fmt: skip
    resp = await api.post("/v1/ingest", json=body, headers=as_a)
    assert resp.status_code == 201, resp.text
    expected = connector_source_id(a, scope.tenant_id, "notes.json")
    assert resp.json()["sourceId"] == str(expected)
    assert expected != source_id_for("notes.json")
    found = await api.get("/v1/sources", params={"connector": a, "externalId": "notes.json"})
    assert found.status_code == 200, found.text
    out = found.json()
    assert out["sourceId"] == str(expected)
    assert out["rootNodeId"] is None  # JSON records have no root node
    assert out["acl"] == ["group:staff", "user:ann"]
    assert out["state"] == "current" and out["retired"] is False
    # A text item, once its job is done, answers its root node, a node of the current graph.
    text = {"format": "text", "name": "Q3 plan", "content": "# Plan\n\nShip it.",
            "externalId": "docs/plan.md"}  # fmt: skip
    job = await api.post("/v1/ingest", json=text, headers=as_a)
    assert job.status_code == 202, job.text
    await _settled(api, job.json()["jobId"])
    found = await api.get("/v1/sources", params={"connector": a, "externalId": "docs/plan.md"})
    out = found.json()
    assert out["sourceId"] == str(connector_source_id(a, scope.tenant_id, "docs/plan.md"))
    assert out["name"] == "Q3 plan" and out["acl"] is None
    node = await api.get(f"/v1/nodes/{out['rootNodeId']}")
    assert node.status_code == 200, node.text
    # A token of A may not ingest as B, nor as no connector at all.
    resp = await api.post("/v1/ingest", json={**body, "connector": b}, headers=as_a)
    _error(resp, 403, "FORBIDDEN")
    plain = {k: v for k, v in body.items() if k not in ("externalId", "acl", "marker")}
    _error(await api.post("/v1/ingest", json=plain, headers=as_a), 403, "FORBIDDEN")
    # Naming its own connector is fine; the same bytes again are deduplicated.
    again = await api.post("/v1/ingest", json={**body, "connector": a}, headers=as_a)
    assert again.status_code == 200 and again.json()["deduplicated"] is True
    # An API key cannot ingest as a connector.
    _error(await api.post("/v1/ingest", json=body), 403, "FORBIDDEN")
    # A hand ingest of the same name is its own source; the lookup still answers A's.
    hand = await api.post("/v1/ingest", json=plain)
    assert hand.status_code == 201 and hand.json()["sourceId"] == str(source_id_for("notes.json"))
    found = await api.get("/v1/sources", params={"connector": a, "externalId": "notes.json"})
    assert found.json()["sourceId"] == str(expected)
    # B made nothing under that external id.
    missing = await api.get("/v1/sources", params={"connector": b, "externalId": "notes.json"})
    _error(missing, 404, "NOT_FOUND")


async def test_bad_tokens_and_lookups(
    api: httpx.AsyncClient, server: ServerProcess, scope: Scope
) -> None:
    cid = await _add(api)
    body = {"format": "text", "name": "a.txt", "content": "hello", "externalId": "a.txt"}
    forged = _token(server, scope, cid, key=b"k" * 32)
    _error(
        await api.post("/v1/ingest", json=body, headers={"x-connector-token": forged}),
        401, "UNAUTHENTICATED",
    )  # fmt: skip
    unknown = _token(server, scope, str(uuid.uuid4()))
    _error(
        await api.post("/v1/ingest", json=body, headers={"x-connector-token": unknown}),
        401, "UNAUTHENTICATED",
    )  # fmt: skip
    token = _token(server, scope, cid)
    resp = await api.post(
        "/v1/ingest", json={**body, "externalId": ""}, headers={"x-connector-token": token}
    )
    _error(resp, 400, "INVALID_REQUEST")
    resp = await api.post(
        "/v1/ingest", json={**body, "acl": "everyone"}, headers={"x-connector-token": token}
    )
    _error(resp, 400, "INVALID_REQUEST")
    files = {"file": ("a.txt", b"hello")}
    resp = await api.post(
        "/v1/ingest", files=files, data={"format": "text", "name": "a.txt"},
        headers={"x-connector-token": token},
    )  # fmt: skip
    _error(resp, 400, "INVALID_REQUEST")
    ok = await api.post("/v1/ingest", json=body, headers={"x-connector-token": token})
    assert ok.status_code == 202, ok.text
    # Lookup parameters.
    _error(await api.get("/v1/sources", params={"externalId": "a.txt"}), 400, "INVALID_REQUEST")
    _error(await api.get("/v1/sources", params={"connector": cid}), 400, "INVALID_REQUEST")
    _error(
        await api.get("/v1/sources", params={"connector": "x", "externalId": "a"}),
        400, "INVALID_REQUEST",
    )  # fmt: skip
    _error(
        await api.get("/v1/sources", params={"connector": cid, "externalId": "a.txt",
                                             "prefix": "a"}),
        400, "INVALID_REQUEST",
    )  # fmt: skip
    # A removed connector's tokens are refused.
    assert (await api.delete(f"/v1/connectors/{cid}")).status_code == 200
    resp = await api.post("/v1/ingest", json=body, headers={"x-connector-token": token})
    _error(resp, 401, "UNAUTHENTICATED")


def _cli(server: ServerProcess, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TELHA_URL": server.base_url, "TELHA_API_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "telha", "connector", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_cli_add_list_token_remove(server: ServerProcess, tmp_path: Path) -> None:
    scope = Scope(f"tenant-{uuid.uuid4()}", "org")
    key = server.create_key(scope.tenant_id, scope.organization_id)
    added = _cli(server, key, "add", "folder", "--root", str(tmp_path), "--exclude", "*.tmp",
                 "--every", "15m")  # fmt: skip
    assert added.returncode == 0, added.stderr
    cid = added.stdout.strip()
    assert uuid.UUID(cid)
    listed = _cli(server, key, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split("\t")[:3] == ["id", "kind", "every"]
    assert lines[1].split("\t")[:3] == [cid, "folder", "900s"]
    bad = _cli(server, key, "add", "ftp")
    assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stderr
    token = _cli(server, key, "token", cid, "--tenant", scope.tenant_id,
                 "--org", scope.organization_id, "--config", str(server.config))  # fmt: skip
    assert token.returncode == 0, token.stderr
    resp = httpx.post(
        f"{server.base_url}/v1/ingest",
        json={"format": "json", "name": "x.json", "content": "{}", "externalId": "x.json"},
        headers={"x-connector-token": token.stdout.strip()},
    )
    assert resp.status_code == 201, resp.text
    nope = _cli(server, key, "token", str(uuid.uuid4()), "--tenant", scope.tenant_id,
                "--org", scope.organization_id, "--config", str(server.config))  # fmt: skip
    assert nope.returncode == 1 and "no such connector" in nope.stderr
    removed = _cli(server, key, "remove", cid)
    assert removed.returncode == 0 and removed.stdout.strip() == f"{cid}  removed"
    again = _cli(server, key, "remove", cid)
    assert again.returncode == 1 and "NOT_FOUND" in again.stderr
