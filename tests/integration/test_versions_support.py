"""Supersede and nodes other sources support (docs/architecture.md, "Versions and node
identity"), driven by a scripted worker over gRPC against a real server: a node two sources
share leaves the graph only when neither asserts it; a stream's rows stay invisible until
its finalize publishes them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant, queue_server
from tests.support.wait import wait_job
from tests.support.worker import ScriptedWorker

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[InProcessServer]:
    with queue_server(tmp_path_factory, f"support-{engine}", 5.0, engine, in_process=True) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _mentioning(text: str, person: str | None) -> dict[str, Any]:
    """A DOC spanning ``text`` that MENTIONS ``person`` (a worker-supplied id) when given."""
    data = text.encode()
    nodes: list[dict[str, Any]] = [{"labels": ["DOC"], "properties": {}, "spanRefs": [0]}]
    rels: list[dict[str, Any]] = []
    if person is not None:
        nodes.append(
            {"labels": ["PERSON"], "properties": {"name": "Ana"}, "spanRefs": [0], "id": person}
        )
        rels.append({"type": "MENTIONS", "fromRef": 0, "toRef": 1, "properties": {}})
    return {
        "v": 1,
        "canonicalText": text,
        "spans": [{"start": 0, "end": len(data), "kind": "body"}],
        "nodes": nodes,
        "relationships": rels,
    }


async def _apply(tenant: Tenant, worker: ScriptedWorker, name: str, sub: dict[str, Any]) -> None:
    await tenant.post("text", name, sub["canonicalText"])
    job = await worker.next_job(["text"])
    resp = await worker.submit(job, sub)
    assert resp.accepted, resp


async def test_a_shared_node_leaves_only_when_no_source_asserts_it(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    person = str(uuid.uuid5(uuid.NAMESPACE_URL, f"ana:{tenant.scope.tenant_id}"))
    await _apply(tenant, worker, "a.txt", _mentioning("Ana wrote A.", person))
    await _apply(tenant, worker, "b.txt", _mentioning("Ana wrote B.", person))
    # A's new version no longer mentions Ana: B still does, so she stays, with B's spans only.
    await _apply(tenant, worker, "a.txt", _mentioning("Nobody wrote A.", None))
    node = await tenant.client.get(f"/v1/nodes/{person}")
    assert node.status_code == 200, node.text
    spans = node.json()["provenance"]["spans"]
    assert [s["text"] for s in spans] == ["Ana wrote B."]
    # B's new version drops her too: now she is gone, and still readable as of before.
    before = node.json()["txTime"]["from"]
    await _apply(tenant, worker, "b.txt", _mentioning("Nobody wrote B.", None))
    assert (await tenant.client.get(f"/v1/nodes/{person}")).status_code == 404
    old = await tenant.client.get(f"/v1/nodes/{person}", params={"asOf": before})
    assert old.status_code == 200 and old.json()["properties"] == {"name": "Ana"}


async def test_stream_rows_are_invisible_until_finalize(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    await _apply(tenant, worker, "s.txt", _mentioning("first version", None))
    posted = await tenant.post("text", "s.txt", "second version, streamed")
    source = posted["sourceId"]
    job = await worker.next_job(["text"])
    part = _mentioning("second ", None)
    part.update(seq=0, partial=True)
    assert (await worker.submit(job, part)).accepted
    nodes = (await tenant.client.get("/v1/nodes", params={"sourceId": source})).json()["nodes"]
    texts = [s["text"] for n in nodes for s in n["provenance"]["spans"]]
    assert texts == ["first version"]  # the stream's first part is not visible yet
    last = {
        "v": 1,
        "canonicalText": "version",
        "spans": [{"start": 7, "end": 14, "kind": "body"}],
        "nodes": [{"labels": ["DOC"], "properties": {"n": 2}, "spanRefs": [0]}],
        "relationships": [],
        "seq": 1,
        "partial": False,
    }
    assert (await worker.submit(job, last)).accepted
    done = await wait_job(tenant.client, job.job_id)
    assert done["state"] == "completed" and done["stats"]["nodes_removed"] == 1
    nodes = (await tenant.client.get("/v1/nodes", params={"sourceId": source})).json()["nodes"]
    texts = sorted(s["text"] for n in nodes for s in n["provenance"]["spans"])
    assert texts == ["second ", "version"]


def _paragraphs(texts: list[str], base: int = 0) -> dict[str, Any]:
    """A submission (or a stream part whose text starts at byte ``base``) of one P node per
    text, each spanning it; texts are joined by newlines."""
    text = "\n".join(texts)
    spans, nodes, at = [], [], base
    for i, piece in enumerate(texts):
        spans.append({"start": at, "end": at + len(piece.encode()), "kind": "body"})
        nodes.append({"labels": ["P"], "properties": {}, "spanRefs": [i]})
        at += len(piece.encode()) + 1
    return {"v": 1, "canonicalText": text, "spans": spans, "nodes": nodes, "relationships": []}


async def _ids_by_text(tenant: Tenant, source: str) -> dict[str, str]:
    nodes = (await tenant.client.get("/v1/nodes", params={"sourceId": source})).json()["nodes"]
    return {n["provenance"]["spans"][0]["text"]: n["nodeId"] for n in nodes}


async def test_a_stream_after_a_single_shot_matches_its_deferred_keys(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    # A source's first (single-shot) version defers its match keys; the first part of a
    # later stream stores them so every part can find the ids it matches.
    await _apply(tenant, worker, "d.txt", _paragraphs(["alpha", "beta", "delta"]))
    posted = await tenant.post("text", "d.txt", "gamma\nbeta\ndelta")
    source = posted["sourceId"]
    first = await _ids_by_text(tenant, source)
    job = await worker.next_job(["text"])
    part = _paragraphs(["gamma", ""])
    part["nodes"], part["spans"] = part["nodes"][:1], part["spans"][:1]
    part.update(seq=0, partial=True)
    assert (await worker.submit(job, part)).accepted
    last = _paragraphs(["beta", "delta"], base=len(b"gamma\n"))
    last.update(seq=1, partial=False)
    assert (await worker.submit(job, last)).accepted
    done = await wait_job(tenant.client, job.job_id)
    assert done["state"] == "completed", done
    assert (done["stats"]["nodes_unchanged"], done["stats"]["nodes_removed"]) == (2, 1)
    second = await _ids_by_text(tenant, source)
    assert set(second) == {"gamma", "beta", "delta"}
    assert second["beta"] == first["beta"] and second["delta"] == first["delta"]
    assert second["gamma"] not in first.values()
