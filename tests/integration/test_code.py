"""code_worker inside ``telha serve``: an archive fans out into one job per source
file; the MANIFEST's CONTAINS edges appear as the files' jobs complete; a new archive version
re-ingests only the files whose bytes changed, and their FILE nodes keep their ids."""

from __future__ import annotations

import base64
import io
import zipfile
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.conftest import CORPUS
from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant
from tests.support.server import write_config
from tests.support.wait import wait_job
from workers_common import normalize_canonical

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("code")
    config = write_config(folder, workers={"in_process": ["code_worker"], "concurrency": 2})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in sorted(files.items()):
            z.writestr(path, data)
    return buf.getvalue()


async def _ingest_zip(tenant: Tenant, raw: bytes) -> dict[str, Any]:
    body = {"format": "code", "name": "repo.zip", "contentBase64": base64.b64encode(raw).decode(),
            "options": {"repo": "corpus"}}  # fmt: skip
    resp = await tenant.client.post("/v1/ingest", json=body)
    assert resp.status_code == 202, resp.text
    job = await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=30)
    assert job["state"] == "completed", job
    return job


async def _files(tenant: Tenant, manifest_id: str, count: int) -> list[dict[str, Any]]:
    """The manifest's visible CONTAINS edges once ``count`` are there (children applied)."""
    edges: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        while len(edges) < count:
            url = f"/v1/nodes/{manifest_id}/edges"
            edges = (await tenant.client.get(url, params={"direction": "out"})).json()["edges"]
            await anyio.sleep(0.1)
    return sorted(edges, key=lambda e: e["properties"]["ord"])


async def test_archive_fans_out_and_reingests_only_changed_files(tenant: Tenant) -> None:
    root = CORPUS / "code"
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("*/*"))}
    job = await _ingest_zip(tenant, _zip(files))
    assert job["stats"]["files"] == len(files)
    page = await tenant.client.get(
        "/v1/nodes", params={"sourceId": job["sourceId"], "label": "MANIFEST"}
    )
    (manifest,) = page.json()["nodes"]
    edges = await _files(tenant, manifest["nodeId"], len(files))
    assert [e["properties"]["path"] for e in edges] == sorted(files)
    first_ids = {}
    for edge in edges:
        node = (await tenant.client.get(f"/v1/nodes/{edge['to']}")).json()
        assert node["labels"] == ["FILE"]
        assert node["properties"]["path"] == edge["properties"]["path"]
        (span,) = node["provenance"]["spans"]
        source = files[edge["properties"]["path"]].decode("utf-8-sig")
        assert span["text"] == normalize_canonical(source)  # the whole file, NFC/LF
        first_ids[node["properties"]["path"]] = node["nodeId"]
    # A new archive with one file changed: one new child job, the same FILE ids.
    changed = {**files, "go/no_newline_at_eof.go": b"package main\n\nfunc main() {}\n\n// v2\n"}
    second = await _ingest_zip(tenant, _zip(changed))
    jobs = (await tenant.client.get("/v1/nodes", params={"label": "FILE"})).json()["nodes"]
    assert sorted(n["properties"]["path"] for n in jobs) == sorted(files)
    with anyio.fail_after(30):
        while True:
            node = await tenant.client.get(f"/v1/nodes/{first_ids['go/no_newline_at_eof.go']}")
            if node.json()["properties"]["lines"] == 5:
                break
            await anyio.sleep(0.1)
    for path, node_id in first_ids.items():  # the changed file got a version, no other did
        current = (await tenant.client.get(f"/v1/nodes/{node_id}")).json()
        source_id = current["provenance"]["spans"][0]["sourceId"]
        versions = (await tenant.client.get(f"/v1/sources/{source_id}")).json()["versions"]
        assert len(versions) == (2 if path == "go/no_newline_at_eof.go" else 1), path
        # Each member version names the archive's job and version that enqueued it.
        archive = (await tenant.client.get(f"/v1/sources/{job['sourceId']}")).json()
        by_job = {job["jobId"]: archive["versions"][1], second["jobId"]: archive["versions"][0]}
        expected = [second["jobId"], job["jobId"]] if len(versions) == 2 else [job["jobId"]]
        for version, parent_job in zip(versions, expected, strict=True):
            assert version["parent"] == {
                "jobId": parent_job, "sourceId": job["sourceId"], "name": "repo.zip",
                "sourceVersionTx": by_job[parent_job]["sourceVersionTx"],
            }  # fmt: skip


async def test_hostile_archive_ends_dead(tenant: Tenant) -> None:
    body = {"format": "code", "name": "evil.zip",
            "contentBase64": base64.b64encode(_zip({"../x.py": b"x = 1\n"})).decode()}  # fmt: skip
    resp = await tenant.client.post("/v1/ingest", json=body)
    job = await wait_job(tenant.client, resp.json()["jobId"], "completed", "dead", within_s=30)
    assert job["state"] == "dead" and job["attempts"] == 1
    assert str(job["failureReason"]).startswith("corrupt_input: path traversal")
