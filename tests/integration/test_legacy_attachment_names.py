"""A store written before attachments were named under their message (docs/formats.md,
"Attachment names"), on both engines: its ``attachment:<blake3>`` sources keep their names and
stay current; re-sending the same message is deduplicated (no new source); a new version of
the message names its attachment ``<message>/<file>`` and its HAS_ATTACHMENT edge moves there;
both sources' versions name the message job that enqueued them.

The message jobs are run by a scripted worker calling the real ``email_worker`` (for the old
naming, its submission's child renamed the way the old worker named it); the attachments'
``text`` jobs by the server's own text worker."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from typing import Any

import anyio
import blake3
import email_worker
import httpx
import pytest

from telha.domain.model import Scope
from tests.support.inproc import InProcessServer
from tests.support.pg import ENGINES, require_engine
from tests.support.server import write_config
from tests.support.wait import wait_job
from tests.support.worker import ScriptedWorker, scripted_worker
from workers_common import Job
from workers_common.ids import child_root_id

pytestmark = pytest.mark.anyio

NOTES = b"Some notes.\n"
LEGACY = f"attachment:{blake3.blake3(NOTES).hexdigest()}"


@pytest.fixture(scope="module", params=ENGINES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    engine = require_engine(str(request.param))
    folder = tmp_path_factory.mktemp(f"legacy-names-{engine}")
    config = write_config(folder, engine, workers={"in_process": ["text_worker"]})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def scoped(
    server: InProcessServer,
) -> AsyncIterator[tuple[httpx.AsyncClient, ScriptedWorker]]:
    scope = Scope(f"t-{uuid.uuid4()}", "org")
    key = server.create_key(scope.tenant_id, scope.organization_id)
    headers = {"x-api-key": key}
    async with (
        httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=30) as c,
        scripted_worker(server.grpc_addr, server.worker_token(scope)) as w,
    ):
        yield c, w


def _message(body: str) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["Subject"], msg["Message-ID"] = "a@example.test", "notes", "<legacy@x>"
    msg.set_content(body)
    msg.add_attachment(NOTES, maintype="text", subtype="plain", filename="n.txt")
    return bytes(msg)


def _legacy(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as the worker before the naming rule submitted it: the child named
    ``attachment:<blake3>`` and the message's edge to that name's root id."""
    (child,) = result["childJobs"]
    child["name"], child["rootNodeId"] = LEGACY, child_root_id(LEGACY)
    (edge,) = [r for r in result["relationships"] if r["type"] == "HAS_ATTACHMENT"]
    edge["toId"] = child_root_id(LEGACY)
    return result


async def _send(
    c: httpx.AsyncClient, w: ScriptedWorker, raw: bytes, *, legacy: bool
) -> dict[str, Any]:
    """Ingest ``raw`` as ``inbox/legacy.eml``, run its job with the real email worker, wait
    for its child; the parent's status."""
    body = {"format": "eml", "name": "inbox/legacy.eml",
            "contentBase64": base64.b64encode(raw).decode()}  # fmt: skip
    resp = await c.post("/v1/ingest", json=body)
    assert resp.status_code == 202, resp.text
    job = await w.next_job(["eml"])
    result = email_worker.handle(
        Job(job.job_id, "ingest:eml", "eml", "inbox/legacy.eml", raw, None, {}, 0, "t", "o")
    )
    submitted = await w.submit(job, json.dumps(_legacy(result) if legacy else result).encode())
    assert submitted.accepted, submitted
    status = await wait_job(c, job.job_id, within_s=30)
    with anyio.fail_after(30):
        while set(status["children"]) & {"pending", "leased"}:
            await anyio.sleep(0.1)
            status = (await c.get(f"/v1/ingest/{job.job_id}")).json()
    assert status["children"] == {"completed": 1}, status
    return dict(status)


async def _source(c: httpx.AsyncClient, name: str) -> dict[str, Any]:
    (found,) = (await c.get("/v1/sources", params={"prefix": name})).json()["sources"]
    assert found["name"] == name
    return dict((await c.get(f"/v1/sources/{found['sourceId']}")).json())


async def test_old_attachment_sources_keep_their_names_and_new_versions_use_the_rule(
    scoped: tuple[httpx.AsyncClient, ScriptedWorker],
) -> None:
    c, w = scoped
    raw = _message("First.")  # its MIME boundary is random: these bytes, sent twice
    first = await _send(c, w, raw, legacy=True)
    old = await _source(c, LEGACY)
    assert old["state"] == "current" and old["versions"][0]["parent"]["jobId"] == first["jobId"]
    # The same bytes again: deduplicated, nothing new.
    same = {"format": "eml", "name": "inbox/legacy.eml",
            "contentBase64": base64.b64encode(raw).decode()}  # fmt: skip
    again = await c.post("/v1/ingest", json=same)
    assert again.status_code == 200 and again.json()["deduplicated"] is True
    listed = (await c.get("/v1/sources")).json()["sources"]
    assert sorted(s["name"] for s in listed) == [LEGACY, "inbox/legacy.eml"]
    # A new version of the message: its attachment is named under it; the old one stays.
    second = await _send(c, w, _message("Second."), legacy=False)
    new = await _source(c, "inbox/legacy.eml/n.txt")
    (version,) = new["versions"]
    assert version["parent"]["jobId"] == second["jobId"]
    assert version["parent"]["name"] == "inbox/legacy.eml"
    assert (await _source(c, LEGACY))["state"] == "current"  # kept, as documented
    # The message's current HAS_ATTACHMENT edge reaches the new source's root only.
    message = (await c.get("/v1/nodes", params={"label": "MESSAGE"})).json()["nodes"][0]
    url = f"/v1/nodes/{message['nodeId']}/edges"
    edges = (await c.get(url, params={"direction": "out"})).json()["edges"]
    (edge,) = [e for e in edges if e["type"] == "HAS_ATTACHMENT"]
    assert edge["to"] == child_root_id("inbox/legacy.eml/n.txt")
