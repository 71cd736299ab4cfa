"""Versions that supersede and the versions API against a real ``telha serve`` on each engine
(docs/architecture.md, "Versions and node identity"; docs/rest-api.md, "Versions and diffs"):
a re-ingest's current graph is the new version's, unchanged nodes keep their ids, the
previous graph stays readable as of its time; ``GET /v1/sources/{id}/diff`` (defaults,
explicit versions, paging, bad input), ``DELETE /v1/sources/{id}`` (retire, retire again,
re-ingest after it, 404 and 409), each version's ``state``/``publishedTx``/``rootNodeId``/
``changes``, and ``asOf`` on node lists and edges. The store-level test holds an erase job
pending to see the 409 of a source being erased."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import msgspec
import pytest

from telha.domain.erasure import ERASE_FORMAT, ERASE_KIND, ErasePayload
from telha.domain.errors import Conflict, NotFound
from telha.domain.ids import new_id
from telha.domain.model import Dedup, LeaseRef, NewJob, NewVersion, Scope, StreamPart
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.storage import StorageEngine
from tests.support.inproc import InProcessServer
from tests.support.server import write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

#: A transaction time (µs) for the store-level tests' jobs and leases.
NOW = 1_000_000_000_000
V1 = "# Title\n\nAlpha paragraph.\n\nBeta paragraph.\n"
V2 = "# Title\n\nAlpha paragraph.\n\nGamma paragraph.\n"


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("versions-api")
    config = write_config(
        folder, engine, workers={"in_process": ["text_worker", "tabular_worker"], "concurrency": 1}
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def client(server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
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


async def _source(client: httpx.AsyncClient, source_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/sources/{source_id}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def _versions(client: httpx.AsyncClient, source_id: str) -> list[int]:
    """The source's version txs, oldest first."""
    return [v["sourceVersionTx"] for v in reversed((await _source(client, source_id))["versions"])]


async def _diff(client: httpx.AsyncClient, source_id: str, **params: Any) -> dict[str, Any]:
    resp = await client.get(f"/v1/sources/{source_id}/diff", params=params)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def _nodes(client: httpx.AsyncClient, source_id: str, **params: Any) -> list[dict[str, Any]]:
    resp = await client.get("/v1/nodes", params={"sourceId": source_id, "limit": 1000, **params})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["nodes"])


def _texts(nodes: list[dict[str, Any]]) -> list[str]:
    return sorted("".join(s["text"] for s in n["provenance"]["spans"]) for n in nodes)


def _error(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()["error"]
    assert body["code"] == code, body
    return str(body["message"])


async def test_diff_of_an_edit_and_the_version_list(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "markdown", "notes.md", V1)
    src = v1["sourceId"]
    first = await _nodes(client, src)
    v2 = await _ingest(client, "markdown", "notes.md", V2)
    tx1, tx2 = await _versions(client, src)

    diff = await _diff(client, src)  # defaults: the previous and the latest version
    assert (diff["from"], diff["to"]) == (tx1, tx2)
    assert _texts(diff["added"]) == ["Gamma paragraph."]
    assert _texts(diff["removed"]) == ["Beta paragraph."]
    assert diff["changed"] == [] and diff["unchanged"] == 3 and diff["nextCursor"] is None
    assert diff["removed"][0]["txTime"] == {"from": tx1, "to": tx2}
    assert diff["added"][0]["txTime"] == {"from": tx2, "to": None}
    beta = next(n for n in first if _texts([n]) == ["Beta paragraph."])
    assert diff["removed"][0]["nodeId"] == beta["nodeId"]
    assert await _diff(client, src, **{"from": tx1, "to": tx2}) == diff
    assert await _diff(client, src, to=tx2) == diff
    assert await _diff(client, src, **{"from": tx1}) == diff
    # The first version against nothing: every node added.
    whole = await _diff(client, src, to=tx1)
    assert whole["from"] is None and whole["to"] == tx1 and whole["unchanged"] == 0
    assert sorted(n["nodeId"] for n in whole["added"]) == sorted(n["nodeId"] for n in first)

    # The diff agrees with what the publish recorded and the job reported.
    source = await _source(client, src)
    assert source["retired"] is None
    latest, previous = source["versions"]
    counts = {"nodesAdded": 1, "nodesRemoved": 1, "nodesChanged": 0, "nodesUnchanged": 3}
    assert latest["changes"] == counts
    stats = v2["job"]["stats"]
    assert {k: stats[k] for k in ("nodes_added", "nodes_removed")} == {
        "nodes_added": 1,
        "nodes_removed": 1,
    }
    assert previous["changes"] == {
        "nodesAdded": 4, "nodesRemoved": 0, "nodesChanged": 0, "nodesUnchanged": 0
    }  # fmt: skip
    assert (latest["state"], previous["state"]) == ("current", "superseded")
    assert latest["publishedTx"] == tx2 and previous["publishedTx"] == tx1
    document = next(n for n in first if n["labels"] == ["DOCUMENT"])
    assert latest["rootNodeId"] == previous["rootNodeId"] == document["nodeId"]


async def test_changed_nodes_carry_both_rows(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "csv", "t.csv", "k,v\na,1\nb,2\n")
    src = v1["sourceId"]
    await _ingest(client, "csv", "t.csv", "k,v\na,1\nb,3\nc,4\n")
    tx1, tx2 = await _versions(client, src)
    diff = await _diff(client, src)
    (change,) = diff["changed"]
    before, after = change["before"], change["after"]
    assert before["nodeId"] == after["nodeId"] and after["labels"] == ["TABLE"]
    assert (before["properties"]["rows"], after["properties"]["rows"]) == (2, 3)
    assert before["txTime"]["from"] == tx1 and after["txTime"]["from"] == tx2
    assert len(diff["added"]) == 2 and len(diff["removed"]) == 1 and diff["unchanged"] == 1
    changes = (await _source(client, src))["versions"][0]["changes"]
    assert changes == {
        "nodesAdded": 2, "nodesRemoved": 1, "nodesChanged": 1, "nodesUnchanged": 1
    }  # fmt: skip


async def test_diff_pages_by_node_id(client: httpx.AsyncClient) -> None:
    records = [{"n": i} for i in range(40)]
    v1 = await _ingest(client, "json", "many.json", msgspec.json.encode(records).decode())
    src = v1["sourceId"]
    edited = [{"n": i * 100 + 1} if i % 3 == 0 else r for i, r in enumerate(records)]
    await _ingest(client, "json", "many.json", msgspec.json.encode(edited[:35]).decode())
    await _ingest(client, "json", "many.json", msgspec.json.encode(edited[:30]).decode())
    tx1, _, tx3 = await _versions(client, src)
    whole = await _diff(client, src, **{"from": tx1, "to": tx3, "limit": 1000})
    assert whole["nextCursor"] is None
    # 10 of the first 30 records edited: 10 added; those 10 and the last 10 removed.
    assert (len(whole["added"]), len(whole["removed"]), whole["unchanged"]) == (10, 20, 20)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"from": tx1, "to": tx3, "limit": 7}
        if cursor is not None:
            params["cursor"] = cursor
        page = await _diff(client, src, **params)
        pages += 1
        listed = [n["nodeId"] for n in page["added"] + page["removed"]]
        listed += [c["after"]["nodeId"] for c in page["changed"]]
        assert len(listed) <= 7 and page["unchanged"] == 20
        assert (page["from"], page["to"]) == (tx1, tx3)
        seen += sorted(listed)
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == 5
    ids = [n["nodeId"] for n in whole["added"] + whole["removed"]]
    assert seen == sorted(seen, key=lambda i: uuid.UUID(i).bytes) and sorted(seen) == sorted(ids)


async def test_diff_bad_input(client: httpx.AsyncClient, server: InProcessServer) -> None:
    v1 = await _ingest(client, "json", "r.json", '[{"a": 1}]')
    src = v1["sourceId"]
    other = await _ingest(client, "json", "other.json", '[{"b": 1}]')  # between the two
    await _ingest(client, "json", "r.json", '[{"a": 2}]')
    tx1, tx2 = await _versions(client, src)
    url = f"/v1/sources/{src}/diff"
    # Not versions of this source.
    for params in ({"from": tx1 - 1}, {"to": tx2 + 1}, {"from": 5, "to": tx2}):
        msg = _error(await client.get(url, params=params), 404, "NOT_FOUND")
        assert "is not a version of this source" in msg
    resp = await client.get(url, params={"from": other["sourceVersionTx"], "to": tx2})
    _error(resp, 404, "NOT_FOUND")
    # from ≥ to, given or defaulted.
    for params in ({"from": tx2, "to": tx1}, {"from": tx1, "to": tx1}, {"from": tx2}):
        msg = _error(await client.get(url, params=params), 400, "INVALID_REQUEST")
        assert "must be before" in msg
    for name in ("from", "to", "limit"):
        for bad in ("abc", "-1", "1.5", "", str(2**63)):
            resp = await client.get(url, params={name: bad})
            assert _error(resp, 400, "INVALID_REQUEST").startswith(name), (name, bad)
    for params in ({"limit": 0}, {"limit": 1001}, {"cursor": "nope"}):
        _error(await client.get(url, params=params), 400, "INVALID_REQUEST")
    # Unknown source, not a UUID, another scope's source.
    _error(await client.get(f"/v1/sources/{uuid.uuid4()}/diff"), 404, "NOT_FOUND")
    _error(await client.get("/v1/sources/nope/diff"), 404, "NOT_FOUND")
    other_key = server.create_key(f"t-{uuid.uuid4()}", "org")
    resp = await client.get(url, headers={"x-api-key": other_key})
    _error(resp, 404, "NOT_FOUND")
    _error(await client.get(url, headers={"x-api-key": "wrong"}), 401, "UNAUTHENTICATED")


async def test_retire_then_reingest(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "markdown", "gone.md", V1)
    src = v1["sourceId"]
    (tx1,) = await _versions(client, src)
    resp = await client.delete(f"/v1/sources/{src}", params={"reason": "obsolete"})
    assert resp.status_code == 200, resp.text
    done = resp.json()
    assert set(done) == {"sourceId", "retired", "versionTx", "nodesClosed"}
    assert done["sourceId"] == src and done["versionTx"] == tx1 and done["nodesClosed"] == 4
    retired_tx = done["retired"]["tx"]
    assert retired_tx > tx1 and done["retired"]["reason"] == "obsolete"
    # Retiring again (even with another reason, in the body) answers the first retire.
    again = await client.request("DELETE", f"/v1/sources/{src}", json={"reason": "again"})
    assert again.status_code == 200 and again.json() == done
    assert (await client.delete(f"/v1/sources/{src}")).json() == done

    assert await _nodes(client, src) == []
    assert len(await _nodes(client, src, asOf=retired_tx - 1)) == 4
    assert await _nodes(client, src, asOf=retired_tx) == []
    source = await _source(client, src)
    assert source["retired"] == {"tx": retired_tx, "reason": "obsolete"}
    assert [v["state"] for v in source["versions"]] == ["retired"]
    text = await client.get(f"/v1/sources/{src}/versions/{tx1}/text")  # history stays
    assert text.status_code == 200 and text.text == V1

    # The same bytes again: a new version (no dedup against a retired source).
    again_v1 = await _ingest(client, "markdown", "gone.md", V1)
    assert again_v1["sourceId"] == src and "job" in again_v1
    source = await _source(client, src)
    assert source["retired"] is None
    assert [v["state"] for v in source["versions"]] == ["current", "retired"]
    assert _texts(await _nodes(client, src)) == _texts(await _nodes(client, src, asOf=tx1))
    assert (await _diff(client, src))["from"] == tx1


async def test_retire_bad_input(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "json", "keep.json", '[{"a": 1}]')
    url = f"/v1/sources/{v1['sourceId']}"
    for kwargs in (
        {"params": {"reason": ""}},
        {"params": {"reason": "   "}},
        {"params": {"reason": "x" * 1001}},
        {"params": {"reason": "a"}, "json": {"reason": "b"}},
        {"json": {"reason": 5}},
        {"json": {"why": "x"}},
        {"json": ["x"]},
        {"content": b"{not json", "headers": {"content-type": "application/json"}},
    ):
        _error(await client.request("DELETE", url, **kwargs), 400, "INVALID_REQUEST")
    assert (await _source(client, v1["sourceId"]))["retired"] is None  # nothing retired
    _error(await client.delete(f"/v1/sources/{uuid.uuid4()}"), 404, "NOT_FOUND")
    _error(await client.delete("/v1/sources/not-a-uuid"), 404, "NOT_FOUND")
    resp = await client.request("DELETE", url, json={"reason": None})
    assert resp.status_code == 200 and resp.json()["retired"]["reason"] is None


async def test_erased_source_cannot_be_retired(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "json", "secret.json", '[{"who": "someone"}]')
    src = v1["sourceId"]
    await _ingest(client, "json", "secret.json", '[{"who": "someone else"}]')
    tx1, _ = await _versions(client, src)
    erase = await client.post(
        f"/v1/sources/{src}/erase", json={"reason": "request", "versionTx": tx1}
    )
    assert erase.status_code == 200, erase.text
    states = [v["state"] for v in (await _source(client, src))["versions"]]
    assert states == ["current", "erased"]
    _error(await client.get(f"/v1/sources/{src}/diff"), 410, "CONTENT_ERASED")
    erase = await client.post(f"/v1/sources/{src}/erase", json={"reason": "all of it"})
    assert erase.status_code == 200, erase.text
    msg = _error(await client.delete(f"/v1/sources/{src}"), 409, "CONFLICT")
    assert "erased" in msg


async def test_as_of_on_node_lists_and_edges(client: httpx.AsyncClient) -> None:
    v1 = await _ingest(client, "markdown", "edges.md", V1)
    src = v1["sourceId"]
    await _ingest(client, "markdown", "edges.md", V2)
    tx1, _ = await _versions(client, src)
    doc = next(n for n in await _nodes(client, src) if n["labels"] == ["DOCUMENT"])

    async def contained(**params: Any) -> list[str]:
        """The texts of the nodes the document CONTAINS (then), and of those they contain
        (the paragraphs under the section of ``# Title``)."""
        texts, parents = [], [doc["nodeId"]]
        for _ in range(2):
            children = []
            for parent in parents:
                resp = await client.get(f"/v1/nodes/{parent}/edges", params=params)
                assert resp.status_code == 200, resp.text
                children += [e["to"] for e in resp.json()["edges"] if e["from"] == parent]
            for node_id in children:
                node = (await client.get(f"/v1/nodes/{node_id}", params=params)).json()
                texts.append(node["provenance"]["spans"][0]["text"])
            parents = children
        return sorted(texts)

    assert await contained() == ["# Title", "Alpha paragraph.", "Gamma paragraph."]
    assert await contained(asOf=tx1) == ["# Title", "Alpha paragraph.", "Beta paragraph."]
    assert await contained(asOf=tx1, direction="in") == []
    resp = await client.get(f"/v1/nodes/{doc['nodeId']}/edges", params={"asOf": 1})
    _error(resp, 404, "NOT_FOUND")
    assert await _nodes(client, src, asOf=1) == []
    for bad in ("abc", "-1", "1.5", "", "1e6", str(2**63)):
        for path in ("/v1/nodes", f"/v1/nodes/{doc['nodeId']}/edges"):
            resp = await client.get(path, params={"asOf": bad})
            assert _error(resp, 400, "INVALID_REQUEST").startswith("asOf"), (path, bad)


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


def _projection(words: list[str]) -> Projection:
    text = "\n".join(words).encode()
    spans, nodes, at = [], [], 0
    for i, word in enumerate(words):
        spans.append(SpanOut(at, at + len(word), "line"))
        nodes.append(NodeOut(("WORD",), msgspec.json.encode({"w": word}), (i,)))
        at += len(word) + 1
    return Projection(text, spans, nodes, [])


async def test_store_retire_refuses_a_source_being_erased(store: StorageEngine) -> None:
    scope = Scope("t", f"o-{uuid.uuid4()}")
    source = new_id()
    v = NewVersion(source, "w.txt", "text", new_id() * 2, 10, "test")
    out = await store.versions.commit(scope, v, _projection(["a", "b"]), dedup=Dedup.NONE)
    assert out.source_version_tx is not None
    payload = ErasePayload(source_id=str(uuid.UUID(bytes=source)), reason="r", principal="p")
    job = NewJob(new_id(), ERASE_KIND, ERASE_FORMAT, source, None, msgspec.json.encode(payload))
    await store.erasure.enqueue(scope, job, payload, now_us=1)  # pending: being erased
    with pytest.raises(Conflict):
        await store.versions.retire(scope, source, "no")
    with pytest.raises(NotFound):
        await store.versions.retire(scope, new_id(), None)
    with pytest.raises(NotFound):
        await store.versions.retire(Scope("never", "wrote"), source, None)
    other = new_id()
    v2 = NewVersion(other, "x.txt", "text", new_id() * 2, 10, "test")
    await store.versions.commit(scope, v2, _projection(["a", "c"]), dedup=Dedup.NONE)
    done = await store.versions.retire(scope, other, None)
    assert done.nodes_closed == 2 and done.reason is None
    diff = await store.reads.diff(
        scope, other, from_tx=None, to_tx=None, limit=10, after=None
    )  # the retired version is still the latest: against nothing, all added
    assert diff.from_tx is None and len(diff.added) == 2 and diff.next_after is None


async def test_store_lists_and_diffs_published_versions_only(store: StorageEngine) -> None:
    """A stream still open wrote a version row and nodes at its pin: not listed, not a
    version a diff may name, and not the default ``to``."""
    scope = Scope("t", f"o-{uuid.uuid4()}")
    source = new_id()
    raw = new_id() * 2
    v1 = NewVersion(source, "s.txt", "text", new_id() * 2, 10, "test")
    out = await store.versions.commit(scope, v1, _projection(["a", "b"]), dedup=Dedup.NONE)
    assert out.source_version_tx is not None
    job = NewJob(new_id(), "ingest:text", "text", source, raw, b'{"name":"s.txt"}')
    await store.jobs.enqueue(scope, job, now_us=NOW, dedup=False)
    held = await store.jobs.lease_next(
        ["text"], scope=scope, worker_id="w1", now_us=NOW, lease_us=10**9
    )
    assert held is not None
    lease = LeaseRef(held.job_id, held.lease_generation)
    part = StreamPart(lease, "w1", 0, True, 0, NOW, 10**9, stats=b"{}")
    v2 = NewVersion(source, "s.txt", "text", raw, 10, "w1", job.job_id)
    streamed = await store.versions.apply_stream_part(scope, v2, _projection(["a", "c"]), part)
    assert not streamed.finalized and streamed.source_version_tx is not None
    listed = await store.reads.versions(scope, source)
    assert [v.tx for v in listed] == [out.source_version_tx]
    assert listed[0].published_tx == out.source_version_tx and listed[0].changes is not None
    with pytest.raises(NotFound):
        await store.reads.diff(
            scope, source, from_tx=None, to_tx=streamed.source_version_tx, limit=10, after=None
        )
    diff = await store.reads.diff(scope, source, from_tx=None, to_tx=None, limit=10, after=None)
    assert (diff.from_tx, diff.to_tx, len(diff.added)) == (None, out.source_version_tx, 2)


async def test_openapi_describes_the_versions_api(server: InProcessServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        doc = (await anon.get("/openapi.json")).json()
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    diff = paths["/v1/sources/{sourceId}/diff"]["get"]
    # X-Telha-Principals: a diff is narrowed by the principals (docs/rest-api.md, "Principals").
    names = ["sourceId", "from", "to", "limit", "cursor", "units", "X-Telha-Principals"]
    assert [p["name"] for p in diff["parameters"]] == names
    # 403: a principals header wider than its key's.
    assert set(diff["responses"]) == {"200", "400", "401", "403", "404", "410", "429"}
    retire = paths["/v1/sources/{sourceId}"]["delete"]
    assert set(retire["responses"]) == {"200", "400", "401", "403", "404", "408", "409", "429"}
    assert [p["name"] for p in retire["parameters"]] == ["sourceId", "reason", "X-Telha-Principals"]
    for path in ("/v1/nodes", "/v1/nodes/{nodeId}", "/v1/nodes/{nodeId}/edges"):
        assert "asOf" in [p["name"] for p in paths[path]["get"]["parameters"]], path
    assert set(schemas["DiffOut"]["required"]) == {
        "from", "to", "added", "removed", "changed", "unchanged", "nextCursor"
    }  # fmt: skip
    assert set(schemas["RetireOut"]["required"]) == {
        "sourceId", "retired", "versionTx", "nodesClosed"
    }  # fmt: skip
    version = schemas["VersionOut"]["properties"]
    assert version["state"]["enum"] == ["current", "erased", "retired", "superseded"]
    assert {"publishedTx", "rootNodeId", "changes"} <= set(schemas["VersionOut"]["required"])
    assert "retired" in schemas["SourceOut"]["required"]
