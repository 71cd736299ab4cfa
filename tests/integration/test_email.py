"""email_worker inside ``telha serve``: a reply ingested before its
parent has its IN_REPLY_TO edge hidden until the parent arrives; a person in two messages is
one node; an attachment becomes a child job of its format."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import anyio
import pytest

from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant
from tests.support.server import write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("email")
    config = write_config(
        folder,
        workers={"in_process": ["email_worker", "tabular_worker", "text_worker"], "concurrency": 1},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _message(sender: str, msg_id: str, reply_to: str | None = None) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = sender, "team@example.test", "Plan"
    msg["Message-ID"], msg["Date"] = msg_id, "Tue, 03 Mar 2026 10:00:00 +0000"
    if reply_to:
        msg["In-Reply-To"] = reply_to
    msg.set_content("Hello.")
    return bytes(msg)


async def _ingest(tenant: Tenant, name: str, raw: bytes) -> dict[str, Any]:
    resp = await tenant.client.post(
        "/v1/ingest",
        json={"format": "eml", "name": name, "contentBase64": base64.b64encode(raw).decode()},
    )
    assert resp.status_code == 202, resp.text
    job = await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=30)
    assert job["state"] == "completed", job
    return job


async def _message_node(tenant: Tenant, source_id: str) -> dict[str, Any]:
    page = await tenant.client.get("/v1/nodes", params={"sourceId": source_id, "label": "MESSAGE"})
    (node,) = page.json()["nodes"]
    return dict(node)


async def test_reply_before_parent_then_the_edge_appears(tenant: Tenant) -> None:
    reply_job = await _ingest(
        tenant, "reply.eml", _message("bo@example.test", "<r@x>", reply_to="<p@x>")
    )
    reply = await _message_node(tenant, str(reply_job["sourceId"]))
    url = f"/v1/nodes/{reply['nodeId']}/edges"
    out = (await tenant.client.get(url, params={"direction": "out"})).json()["edges"]
    assert "IN_REPLY_TO" not in {e["type"] for e in out}  # the parent is not there yet
    parent_job = await _ingest(tenant, "parent.eml", _message("Ana <ana@example.test>", "<p@x>"))
    parent = await _message_node(tenant, str(parent_job["sourceId"]))
    out = (await tenant.client.get(url, params={"direction": "out"})).json()["edges"]
    (edge,) = [e for e in out if e["type"] == "IN_REPLY_TO"]
    assert edge["to"] == parent["nodeId"]
    # team@example.test is in both messages: one PERSON node.
    people = (await tenant.client.get("/v1/nodes", params={"label": "PERSON"})).json()["nodes"]
    addresses = [p["properties"]["address"] for p in people]
    assert addresses.count("team@example.test") == 1


async def _out_edges(tenant: Tenant, node_id: str, edge_type: str) -> list[dict[str, Any]]:
    url = f"/v1/nodes/{node_id}/edges"
    edges = (await tenant.client.get(url, params={"direction": "out"})).json()["edges"]
    return [e for e in edges if e["type"] == edge_type]


async def _until(tenant: Tenant, node_id: str, count: int) -> list[dict[str, Any]]:
    """HAS_ATTACHMENT edges of ``node_id`` once ``count`` are visible (their children done)."""
    edges: list[dict[str, Any]] = []
    for _ in range(150):
        edges = await _out_edges(tenant, node_id, "HAS_ATTACHMENT")
        if len(edges) >= count:
            break
        await anyio.sleep(0.1)
    return edges


async def test_attachments_become_child_jobs_linked_to_their_roots(tenant: Tenant) -> None:
    inner = _message("c@example.test", "<inner@x>")
    msgs = []
    for sender in ("a@example.test", "b@example.test"):
        msg = EmailMessage()
        msg["From"], msg["Subject"] = sender, "numbers"
        msg.set_content("Attached.")
        msg.add_attachment(b"id,v\n1,2\n3,4\n", maintype="text", subtype="csv", filename="n.csv")
        msg.add_attachment(b"Some notes.\n", maintype="text", subtype="plain", filename="n.txt")
        msg.add_attachment(inner, maintype="application", subtype="octet-stream",
                           filename="fwd.eml")  # fmt: skip
        msg.add_attachment(b"\x00\x01", maintype="application", subtype="x-blob", filename="b.bin")
        msgs.append(msg)
    first = await _ingest(tenant, "with-attachment.eml", bytes(msgs[0]))
    message = await _message_node(tenant, str(first["sourceId"]))
    # The unknown blob is an ATTACHMENT node at once; the others appear as their children apply.
    edges = await _until(tenant, message["nodeId"], 4)
    assert len(edges) == 4, edges
    targets = {}
    for edge in edges:
        node = (await tenant.client.get(f"/v1/nodes/{edge['to']}")).json()
        targets[edge["properties"]["name"]] = node
    assert targets["n.csv"]["labels"] == ["TABLE"]
    assert targets["n.txt"]["labels"] == ["DOCUMENT"]
    assert targets["fwd.eml"]["labels"] == ["MESSAGE"]
    assert targets["fwd.eml"]["properties"]["message_id"] == "inner@x"
    assert targets["b.bin"]["labels"] == ["ATTACHMENT"]
    assert targets["b.bin"]["properties"]["size"] == 2
    rows = (await tenant.client.get("/v1/nodes", params={"label": "TABLE_ROW"})).json()["nodes"]
    assert sorted(r["properties"]["id"] for r in rows) == [1, 3]
    # The same bytes attached to a second message: each message's attachments are its own
    # sources (named under it), so new roots; the attached message keeps its one MESSAGE
    # node (its id comes from its Message-ID) and the unknown blob its ATTACHMENT node.
    second = await _ingest(tenant, "again.eml", bytes(msgs[1]))
    other = await _message_node(tenant, str(second["sourceId"]))
    again = await _until(tenant, other["nodeId"], 4)
    shared = {e["properties"]["name"] for e in again if e["to"] in {x["to"] for x in edges}}
    assert shared == {"fwd.eml", "b.bin"}
    tables = (await tenant.client.get("/v1/nodes", params={"label": "TABLE"})).json()["nodes"]
    assert len(tables) == 2
    names = (await tenant.client.get("/v1/sources", params={"prefix": "again.eml/"})).json()
    assert sorted(s["name"] for s in names["sources"]) == [
        "again.eml/fwd.eml", "again.eml/n.csv", "again.eml/n.txt",
    ]  # fmt: skip


async def test_a_person_in_two_messages_is_one_node_upserted(tenant: Tenant) -> None:
    await _ingest(tenant, "first.eml", _message("Ana Old <ana2@example.test>", "<f@x>"))
    people = (await tenant.client.get("/v1/nodes", params={"label": "PERSON"})).json()["nodes"]
    (before,) = [p for p in people if p["properties"]["address"] == "ana2@example.test"]
    await _ingest(tenant, "second.eml", _message("Ana New <ANA2@example.test>", "<s@x>"))
    people = (await tenant.client.get("/v1/nodes", params={"label": "PERSON"})).json()["nodes"]
    (after,) = [p for p in people if p["properties"]["address"] == "ana2@example.test"]
    assert after["nodeId"] == before["nodeId"] and after["properties"]["name"] == "Ana New"
    assert after["txTime"]["from"] > before["txTime"]["from"]  # a new version of one node
    url = f"/v1/nodes/{before['nodeId']}"
    old = (await tenant.client.get(url, params={"asOf": before["txTime"]["from"]})).json()
    assert old["properties"]["name"] == "Ana Old"
    # The current version's provenance is the second message's From line.
    spans = (await tenant.client.get(url)).json()["provenance"]["spans"]
    assert any("Ana New" in s["text"] for s in spans)
