"""email_worker inside ``telha serve`` (issue 6, first increment): a reply ingested before its
parent has its IN_REPLY_TO edge hidden until the parent arrives; a person in two messages is
one node; an attachment becomes a child job of its format."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import anyio
import pytest

from tests.support.queue_env import Tenant
from tests.support.server import ServerProcess, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("email")
    config = write_config(
        folder, workers={"in_process": ["email_worker", "tabular_worker"], "concurrency": 1}
    )
    proc = ServerProcess(config).start()
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
    job = await tenant.wait_state(resp.json()["jobId"], "completed", "dead", within_s=30)
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


async def test_attachment_becomes_a_child_job(tenant: Tenant) -> None:
    msg = EmailMessage()
    msg["From"], msg["Subject"] = "a@example.test", "numbers"
    msg.set_content("Attached.")
    msg.add_attachment(b"id,v\n1,2\n3,4\n", maintype="text", subtype="csv", filename="n.csv")
    await _ingest(tenant, "with-attachment.eml", bytes(msg))
    rows = []
    for _ in range(100):  # the child job (a CSV) completes after its parent
        rows = (await tenant.client.get("/v1/nodes", params={"label": "TABLE_ROW"})).json()["nodes"]
        if len(rows) == 2:
            break
        await anyio.sleep(0.1)
    assert sorted(r["properties"]["id"] for r in rows) == [1, 3]
