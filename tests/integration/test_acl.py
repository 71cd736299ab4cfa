"""ACLs, floor-only (docs/rest-api.md, "Principals"), against a real server on both engines:
a folder connector syncs two files of different owners and groups (their POSIX ownership
becomes each source's ACL) beside a source ingested by hand (no ACL); then every read
surface — source, text, spans, chunks, diff, nodes, edges, listings, jobs, search, locate,
the connector lookup, retire, and ``telha mcp`` — is asked with and without principals, by
the ``x-telha-principals`` header and by a key minted with ``--principals``. A source the
principals may not see answers exactly as an absent one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from telha.config import load_config
from telha.domain.model import Scope
from telha.tokens import load_token_key, mint_connector_token
from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config
from tests.support.sync_runs import wait_run
from tests.support.wait import wait_search_indexed

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="files of two owners need chown (root)"),
]

#: The files' owners: ``alice.txt`` is daemon's, ``bob.txt`` nobody's.
ALICE = ("user:daemon", "group:daemon")
BOB = ("user:nobody", "group:nogroup")
HEADER = "x-telha-principals"


@pytest.fixture(scope="module")
def acl_server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """A server running the text worker and the connector worker in-process."""
    folder = tmp_path_factory.mktemp(f"acl-{engine}")
    config = write_config(
        folder, engine, workers={"in_process": ["text_worker", "connectors"]},
        search={"enabled": True}, connectors={"allowed_roots": [tempfile.gettempdir()]},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@dataclass
class Synced:
    """The scope's sources after one sync: ids by file name, and their versions."""

    scope: Scope
    key: str
    connector: str
    ids: dict[str, str]
    txs: dict[str, int]
    roots: dict[str, str]
    jobs: dict[str, str]


@pytest.fixture(scope="module")
def tree() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="telha-acl-"))
    path.chmod(0o755)
    for name, owner in (("alice.txt", 1), ("bob.txt", 65534)):
        (path / name).write_text(f"{name} holds sharedwordx and only{name[:-4]}x\n\nmore.\n")
        (path / name).chmod(0o644)
        os.chown(path / name, owner, owner)
    yield path
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def synced(acl_server: InProcessServer, tree: Path) -> Synced:
    """One scope: the tree synced by a folder connector, and ``public.txt`` by hand."""
    scope = Scope(f"tenant-{uuid.uuid4()}", "org")
    key = acl_server.create_key(scope.tenant_id, scope.organization_id)

    async def sync() -> Synced:
        async with httpx.AsyncClient(
            base_url=acl_server.base_url, headers={"x-api-key": key}, timeout=30
        ) as api:
            hand = await api.post("/v1/ingest", json={
                "format": "text", "name": "public.txt",
                "content": "public.txt holds sharedwordx and onlypublicx\n\nmore.\n"})  # fmt: skip
            assert hand.status_code == 202, hand.text
            made = await api.post(
                "/v1/connectors", json={"kind": "folder", "settings": {"root": str(tree)}}
            )
            assert made.status_code == 201, made.text
            cid = made.json()["connectorId"]
            started = await api.post(f"/v1/connectors/{cid}/runs", json={})
            run_id = started.json()["runId"]
            run = await wait_run(api, cid, run_id)
            assert run["state"] == "completed" and run["added"] == 2, run
            for _ in range(1200):
                job = (await api.get(f"/v1/ingest/{hand.json()['jobId']}")).json()
                if job["state"] == "completed":
                    break
                await anyio.sleep(0.05)
            listed = (await api.get("/v1/sources")).json()["sources"]
            ids = {s["name"]: s["sourceId"] for s in listed}
            assert set(ids) == {"alice.txt", "bob.txt", "public.txt"}, listed
            txs, roots, jobs = {}, {}, {}
            for name, sid in ids.items():
                got = (await api.get(f"/v1/sources/{sid}")).json()
                txs[name] = got["versions"][0]["sourceVersionTx"]
                roots[name] = got["versions"][0]["rootNodeId"]
                jobs[name] = got["lastJobId"]
            for name in ("alice.txt", "bob.txt"):
                item = await api.get("/v1/sources", params={"connector": cid, "externalId": name})
                want = sorted(ALICE if name == "alice.txt" else BOB)
                assert item.json()["acl"] == want, item.text  # POSIX owner and group
        return Synced(scope, key, cid, ids, txs, roots, jobs)

    with ThreadPoolExecutor(1) as pool:  # own thread, own event loop
        result = pool.submit(anyio.run, sync).result()
    with httpx.Client(base_url=acl_server.base_url) as c:
        wait_search_indexed(c, within_s=120)
    return result


@pytest.fixture
async def api(acl_server: InProcessServer, synced: Synced) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=acl_server.base_url, headers={"x-api-key": synced.key}, timeout=30
    ) as c:
        yield c


async def _seen(api: httpx.AsyncClient, s: Synced, headers: dict[str, str]) -> dict[str, set[str]]:
    """Which of the three files each listing and search surface shows to ``headers``."""
    names = {v: k for k, v in s.ids.items()}

    async def ok(resp: httpx.Response) -> Any:
        assert resp.status_code == 200, resp.text
        return resp.json()

    sources = await ok(await api.get("/v1/sources", headers=headers))
    hits = await ok(await api.get("/v1/search", params={"q": "sharedwordx"}, headers=headers))
    located = await ok(await api.post("/v1/locate", json={"text": "sharedwordx"}, headers=headers))
    nodes = await ok(await api.get("/v1/nodes", params={"limit": 1000}, headers=headers))
    node_sources = {
        sp["sourceId"] for n in nodes["nodes"] for sp in n["provenance"]["spans"]
    } & set(names)
    jobs = await ok(await api.get("/v1/ingest", params={"kind": "ingest:text"}, headers=headers))
    return {
        "sources": {s["name"] for s in sources["sources"]},
        "search": {names[h["sourceId"]] for h in hits["hits"]},
        "locate": {names[p["sourceId"]] for p in located},
        "nodes": {names[x] for x in node_sources},
        "jobs": {names[j["sourceId"]] for j in jobs["jobs"] if j["sourceId"] in names},
    }


async def _telha(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m telha ARGS`` in a thread (the event loop stays free)."""

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "telha", *args], capture_output=True, text=True,
            timeout=120, check=False, env=child_environ(),
        )  # fmt: skip

    return await anyio.to_thread.run_sync(run)


def _everywhere(names: set[str]) -> dict[str, set[str]]:
    return dict.fromkeys(("sources", "search", "locate", "nodes", "jobs"), names)


async def test_listings_and_search_show_only_admitted_sources(
    api: httpx.AsyncClient, synced: Synced
) -> None:
    everything = {"alice.txt", "bob.txt", "public.txt"}
    assert await _seen(api, synced, {}) == _everywhere(everything)  # as before ACLs
    assert await _seen(api, synced, {HEADER: "user:daemon"}) == _everywhere(
        {"alice.txt", "public.txt"}
    )
    assert await _seen(api, synced, {HEADER: "group:nogroup"}) == _everywhere(
        {"bob.txt", "public.txt"}
    )
    both = {HEADER: "user:daemon, group:nogroup"}
    assert await _seen(api, synced, both) == _everywhere(everything)
    # Several headers are one list; a principal no ACL names sees the ACL-less source only.
    many = await api.get("/v1/sources", headers=[(HEADER, "user:daemon"), (HEADER, "user:x")])
    assert {s["name"] for s in many.json()["sources"]} == {"alice.txt", "public.txt"}
    assert await _seen(api, synced, {HEADER: "user:carol"}) == _everywhere({"public.txt"})
    # Case-sensitive: a principal is matched exactly.
    assert await _seen(api, synced, {HEADER: "user:DAEMON"}) == _everywhere({"public.txt"})


def _reads(s: Synced, name: str, source_id: str | None = None) -> list[tuple[str, str]]:
    """``(method, path)`` of every per-source read of file ``name`` (another source id
    given: the same paths for that id)."""
    sid = source_id or s.ids[name]
    tx = s.txs[name]
    return [
        ("GET", f"/v1/sources/{sid}"),
        ("GET", f"/v1/sources/{sid}/versions/{tx}/text"),
        ("GET", f"/v1/sources/{sid}/versions/{tx}/spans"),
        ("GET", f"/v1/sources/{sid}/versions/{tx}/chunks"),
        ("GET", f"/v1/sources/{sid}/diff"),
    ]


async def test_a_source_not_admitted_answers_as_if_absent(
    api: httpx.AsyncClient, synced: Synced
) -> None:
    absent = str(uuid.uuid4())
    daemon = {HEADER: "user:daemon"}
    for (method, path), (_, absent_path) in zip(
        _reads(synced, "bob.txt"), _reads(synced, "bob.txt", absent), strict=True
    ):
        hidden = await api.request(method, path, headers=daemon)
        missing = await api.request(method, absent_path, headers=daemon)
        assert hidden.status_code == 404, (path, hidden.text)
        assert hidden.json() == missing.json(), path  # no existence leak
        assert (await api.request(method, path)).status_code == 200, path  # no principals
        assert (
            await api.request(method, path, headers={HEADER: "group:nogroup"})
        ).status_code == 200
    for method, path in _reads(synced, "alice.txt") + _reads(synced, "public.txt"):
        assert (await api.request(method, path, headers=daemon)).status_code == 200, path
    # Nodes and their edges: bob's root node is absent for daemon.
    bob_root, gone = synced.roots["bob.txt"], str(uuid.uuid4())
    for suffix in ("", "/edges"):
        hidden = await api.get(f"/v1/nodes/{bob_root}{suffix}", headers=daemon)
        missing = await api.get(f"/v1/nodes/{gone}{suffix}", headers=daemon)
        assert hidden.status_code == 404 and hidden.json() == missing.json(), hidden.text
        assert (await api.get(f"/v1/nodes/{bob_root}{suffix}")).status_code == 200
    alice_root = synced.roots["alice.txt"]
    assert (await api.get(f"/v1/nodes/{alice_root}", headers=daemon)).status_code == 200
    # The job that wrote bob's version, and the connector's lookup of bob's item.
    hidden = await api.get(f"/v1/ingest/{synced.jobs['bob.txt']}", headers=daemon)
    missing = await api.get(f"/v1/ingest/{uuid.uuid4()}", headers=daemon)
    assert hidden.status_code == 404 and hidden.json() == missing.json()
    hidden = await api.get(f"/v1/ingest/{synced.jobs['bob.txt']}/events", headers=daemon)
    missing = await api.get(f"/v1/ingest/{uuid.uuid4()}/events", headers=daemon)
    assert hidden.status_code == 404 and hidden.json() == missing.json()
    # Cancelling it (a finished job: refused as finished without principals) is absent too.
    hidden = await api.post(f"/v1/ingest/{synced.jobs['bob.txt']}/cancel", headers=daemon)
    missing = await api.post(f"/v1/ingest/{uuid.uuid4()}/cancel", headers=daemon)
    assert hidden.status_code == 404 and hidden.json() == missing.json(), hidden.text
    assert (await api.post(f"/v1/ingest/{synced.jobs['bob.txt']}/cancel")).status_code == 409
    lookup = {"connector": synced.connector, "externalId": "bob.txt"}
    hidden = await api.get("/v1/sources", params=lookup, headers=daemon)
    missing = await api.get(
        "/v1/sources", params={**lookup, "externalId": "nobody.txt"}, headers=daemon
    )
    assert hidden.status_code == 404 and hidden.json() == missing.json()
    assert (await api.get("/v1/sources", params=lookup)).status_code == 200
    # An erasure (even a dry run) of it is refused as absent too.
    hidden = await api.post(
        f"/v1/sources/{synced.ids['bob.txt']}/erase?dryRun=true", headers=daemon
    )
    missing = await api.post(f"/v1/sources/{absent}/erase?dryRun=true", headers=daemon)
    assert hidden.status_code == 404 and hidden.json() == missing.json(), hidden.text
    # A retire of a source the principals cannot see is refused as absent; it stays current.
    retire = await api.delete(f"/v1/sources/{synced.ids['bob.txt']}", headers=daemon)
    assert retire.status_code == 404, retire.text
    assert (await api.get(f"/v1/sources/{synced.ids['bob.txt']}")).json()["state"] == "current"


async def test_a_keys_principals_apply_and_the_header_only_narrows(
    acl_server: InProcessServer, synced: Synced
) -> None:
    made = await _telha(
        "api-key", "create", "--tenant", synced.scope.tenant_id, "--org",
        synced.scope.organization_id, "--principals", "user:daemon,group:nogroup",
        "--config", str(acl_server.config),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    async with httpx.AsyncClient(
        base_url=acl_server.base_url, headers={"x-api-key": made.stdout.strip()}, timeout=30
    ) as keyed:
        everything = {"alice.txt", "bob.txt", "public.txt"}
        assert await _seen(keyed, synced, {}) == _everywhere(everything)
        narrowed = await _seen(keyed, synced, {HEADER: "group:nogroup"})
        assert narrowed == _everywhere({"bob.txt", "public.txt"})
        wider = await keyed.get("/v1/sources", headers={HEADER: "user:daemon, user:root"})
        assert wider.status_code == 403 and wider.json()["error"]["code"] == "FORBIDDEN"
        assert "user:root" in wider.json()["error"]["message"]
    only = acl_server.create_key(synced.scope.tenant_id, synced.scope.organization_id, BOB[::-1])
    async with httpx.AsyncClient(
        base_url=acl_server.base_url, headers={"x-api-key": only}, timeout=30
    ) as keyed:
        assert await _seen(keyed, synced, {}) == _everywhere({"bob.txt", "public.txt"})
        hidden = await keyed.get(f"/v1/sources/{synced.ids['alice.txt']}")
        assert hidden.status_code == 404
    listed = await _telha(
        "api-key", "list", "--tenant", synced.scope.tenant_id, "--org",
        synced.scope.organization_id, "--config", str(acl_server.config),
    )  # fmt: skip
    assert "group:nogroup,user:daemon" in listed.stdout and "\t-" in listed.stdout


async def test_reproject_refuses_a_request_acting_for_principals(
    acl_server: InProcessServer, api: httpx.AsyncClient, synced: Synced
) -> None:
    refused = await api.post(
        "/v1/reproject", json={"dryRun": True}, headers={HEADER: ",".join(BOB)}
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "FORBIDDEN"
    assert "alice.txt" not in refused.text and synced.ids["alice.txt"] not in refused.text
    # Nothing enqueued either: not even a real run is admitted.
    queued = await api.post("/v1/reproject", json={}, headers={HEADER: ",".join(BOB)})
    assert queued.status_code == 403, queued.text
    only = acl_server.create_key(synced.scope.tenant_id, synced.scope.organization_id, BOB)
    async with httpx.AsyncClient(
        base_url=acl_server.base_url, headers={"x-api-key": only}, timeout=30
    ) as keyed:
        by_key = await keyed.post("/v1/reproject", json={"dryRun": True})
        assert by_key.status_code == 403, by_key.text
    whole = await api.post("/v1/reproject", json={"dryRun": True})
    assert whole.status_code == 200, whole.text


@pytest.mark.parametrize(
    "value", ["", ",", "daemon", "user:", "User:daemon", "user:a,,user:b", "user:alice, group"]
)
async def test_a_malformed_header_is_invalid_request(
    api: httpx.AsyncClient, synced: Synced, value: str
) -> None:
    for method, path in [("GET", "/v1/sources"), ("GET", "/v1/search?q=x"),
                         *_reads(synced, "alice.txt")[:2]]:  # fmt: skip
        resp = await api.request(method, path, headers={HEADER: value})
        assert resp.status_code == 400, (value, path, resp.text)
        assert resp.json()["error"]["code"] == "INVALID_REQUEST"
        assert "x-telha-principals" in resp.json()["error"]["message"]
    made = await _telha(
        "api-key", "create", "--tenant", "t", "--org", "o", "--principals", value or ",",
        "--config", "/nonexistent/config.toml",
    )  # fmt: skip
    assert made.returncode == 2 and "--principals" in made.stderr, made.stderr


def _text(result: Any) -> str:
    """A tool call's first text content."""
    return str(result.content[0].text)


async def test_mcp_acts_for_its_principals(acl_server: InProcessServer, synced: Synced) -> None:
    env = {**child_environ(), "TELHA_URL": acl_server.base_url, "TELHA_API_KEY": synced.key,
           "TELHA_PRINCIPALS": "group:nogroup"}  # fmt: skip
    params = StdioServerParameters(command=sys.executable, args=["-m", "telha", "mcp"], env=env)
    names = {v: k for k, v in synced.ids.items()}
    async with Client(params) as mcp:
        listed = json.loads(_text(await mcp.call_tool("list_sources", {})))
        assert {s["name"] for s in listed["sources"]} == {"bob.txt", "public.txt"}
        found = json.loads(_text(await mcp.call_tool("search", {"query": "sharedwordx"})))
        assert {names[h["sourceId"]] for h in found["hits"]} == {"bob.txt", "public.txt"}
        alice = synced.ids["alice.txt"]
        read = await mcp.call_tool(
            "read_span", {"sourceId": alice, "versionTx": synced.txs["alice.txt"], "start": 0,
                          "end": 5},
        )  # fmt: skip
        assert read.is_error and "NOT_FOUND" in _text(read)


async def test_a_connector_tokens_acl_holds_from_the_first_version(
    acl_server: InProcessServer, synced: Synced, api: httpx.AsyncClient
) -> None:
    """``format=json`` publishes in the ingest's own request: the item's ACL is on it before
    that, and a later ingest with another ACL (the same bytes: no new version) moves it."""
    cfg, _ = load_config(acl_server.config, environ={})
    token = mint_connector_token(
        load_token_key(cfg.grpc.token_key, acl_server.db.parent), synced.scope,
        uuid.UUID(synced.connector).bytes, 600,
    )  # fmt: skip
    body = {"format": "json", "name": "rec.json", "content": '[{"text": "tokenwordx"}]',
            "externalId": "rec-1", "acl": ["user:zed"]}  # fmt: skip
    async with httpx.AsyncClient(
        base_url=acl_server.base_url, headers={"x-connector-token": token}, timeout=30
    ) as conn:
        made = await conn.post("/v1/ingest", json=body)
        assert made.status_code == 201, made.text
        source = f"/v1/sources/{made.json()['sourceId']}"
        assert (await api.get(source, headers={HEADER: "user:other"})).status_code == 404
        assert (await api.get(source, headers={HEADER: "user:zed"})).status_code == 200
        again = await conn.post("/v1/ingest", json={**body, "acl": ["user:other"]})
        assert again.status_code == 200 and again.json()["deduplicated"] is True, again.text
        assert (await api.get(source, headers={HEADER: "user:other"})).status_code == 200
        assert (await api.get(source, headers={HEADER: "user:zed"})).status_code == 404
