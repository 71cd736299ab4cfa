"""Shared pieces of the per-format version tests (docs/architecture.md, "Versions and node
identity"): a fresh scope's client, ingest and wait, a source's graph read now or ``asOf``,
and the checks every format must pass after a changed re-ingest."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from tests.support.server import ServerProcess
from tests.support.wait import wait_job

__all__ = ["Graph", "Scoped", "check_new_version", "graph", "scoped", "streamed"]

#: What a node is, without its id: labels, properties and its span texts.
Print = tuple[tuple[str, ...], str, tuple[str, ...]]


@dataclass
class Scoped:
    """A client of a fresh scope on the test server."""

    client: httpx.AsyncClient
    #: The status of the last job :meth:`ingest` waited for.
    last: dict[str, Any] | None = None

    async def ingest(
        self,
        fmt: str,
        name: str,
        raw: bytes,
        options: dict[str, Any] | None = None,
        within_s: float = 120,
    ) -> dict[str, Any]:
        """POST ``raw`` as ``name`` and wait for its job to complete; the job's status."""
        body: dict[str, Any] = {
            "format": fmt,
            "name": name,
            "contentBase64": base64.b64encode(raw).decode(),
        }
        if options:
            body["options"] = options
        resp = await self.client.post("/v1/ingest", json=body)
        assert resp.status_code in (201, 202), resp.text
        out = dict(resp.json())
        if resp.status_code == 201:
            return out
        job = await wait_job(self.client, out["jobId"], "completed", "dead", within_s=within_s)
        assert job["state"] == "completed", job
        self.last = job
        return job

    async def versions(self, source_id: str) -> list[dict[str, Any]]:
        """The source's versions, oldest first."""
        resp = await self.client.get(f"/v1/sources/{source_id}")
        assert resp.status_code == 200, resp.text
        return list(reversed(resp.json()["versions"]))

    async def status(self, node_id: str, as_of: int | None = None) -> int:
        """The status of ``GET /v1/nodes/{node_id}`` (``asOf``)."""
        params = {"asOf": as_of} if as_of is not None else {}
        return (await self.client.get(f"/v1/nodes/{node_id}", params=params)).status_code


@asynccontextmanager
async def scoped(server: ServerProcess) -> AsyncIterator[Scoped]:
    """A fresh scope (tenant) on ``server`` with its own key."""
    key = server.create_key(f"t-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=60
    ) as c:
        yield Scoped(c)


def _print(node: dict[str, Any]) -> Print:
    spans = tuple(s["text"] for s in node["provenance"]["spans"])
    props = json.dumps(node["properties"], sort_keys=True)
    return tuple(node["labels"]), props, spans


@dataclass
class Graph:
    """A source's nodes at one time: id → what the node is."""

    nodes: dict[str, Print]

    def prints(self) -> list[Print]:
        """Every node's print, sorted (the graph without its ids)."""
        return sorted(self.nodes.values())

    def by_label(self, label: str) -> dict[str, Print]:
        """The nodes with ``label``."""
        return {k: v for k, v in self.nodes.items() if label in v[0]}

    def unique(self) -> dict[Print, str]:
        """Print → id of the prints only one node has."""
        seen: dict[Print, list[str]] = {}
        for node_id, p in self.nodes.items():
            seen.setdefault(p, []).append(node_id)
        return {p: ids[0] for p, ids in seen.items() if len(ids) == 1}


async def graph(scope: Scoped, source_id: str, as_of: int | None = None) -> Graph:
    """The nodes of ``source_id`` now (or ``asOf``), every page."""
    params: dict[str, Any] = {"sourceId": source_id, "limit": 1000}
    if as_of is not None:
        params["asOf"] = as_of
    nodes: dict[str, Print] = {}
    while True:
        resp = await scope.client.get("/v1/nodes", params=params)
        assert resp.status_code == 200, resp.text
        page = resp.json()
        for node in page["nodes"]:
            nodes[node["nodeId"]] = _print(node)
        cursor = page.get("nextCursor")
        if not cursor:
            return Graph(nodes)
        params["cursor"] = cursor


def streamed(job: dict[str, Any]) -> bool:
    """Whether job status ``job`` wrote its version as a stream (``partial`` events)."""
    return any(e["transition"] == "partial" for e in job.get("events", []))


async def check_new_version(
    scope: Scoped,
    source_id: str,
    before: Graph,
    after: Graph,
    reference: Graph,
    v1_tx: int | None,
    v2_tx: int,
) -> None:
    """What every format's changed re-ingest must show: the current graph is exactly the new
    version's (``reference``: the same bytes and name ingested first in a fresh scope); the
    old graph just before the new version (``v2_tx - 1``) and, when given, as of the old
    version's tx ``v1_tx`` is ``before``, ids and all; a node whose labels, properties and
    span texts did not change keeps its id; a node that left is 404 now and readable as of
    the old graph. A streamed version is published after its ``sourceVersionTx`` (at its
    finalize), so its graph is not visible as of that tx: pass ``v1_tx=None`` then."""
    assert after.prints() == reference.prints()
    old_at = v2_tx - 1
    assert await graph(scope, source_id, old_at) == before
    if v1_tx is not None:
        assert await graph(scope, source_id, v1_tx) == before
    kept = before.unique()
    for p, node_id in after.unique().items():
        if p in kept:
            assert kept[p] == node_id, p
    for node_id in set(before.nodes) - set(after.nodes):
        assert await scope.status(node_id) == 404, node_id
        assert await scope.status(node_id, old_at) == 200, node_id
