"""Large uploads: ``multipart/form-data`` on ``POST /v1/ingest`` streamed to disk
with BLAKE3, raw bytes stored content-addressed, the job payload referencing them, and workers
reading them with ``FetchContent`` (real gRPC, real worker processes)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import blake3
import httpx
import pytest
from grpclib import GRPCError, Status

from telha.domain.model import Scope
from tests.support.inproc import InProcessServer, Server
from tests.support.queue_env import Tenant, transitions
from tests.support.server import write_config
from tests.support.wait import wait_job, wait_job_blocking
from tests.support.worker import ScriptedWorker

pytestmark = pytest.mark.anyio

MAX_UPLOAD = 4 * 1024 * 1024
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp(f"upload-{engine}")
    config = write_config(
        folder,
        engine,
        workers={"in_process": []},
        jobs={"lease_secs": 30, "reap_interval_s": 0.1},
        ingest={"max_upload_bytes": MAX_UPLOAD},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _form(fmt: str, name: str, options: dict[str, Any] | None = None) -> dict[str, str]:
    form = {"format": fmt, "name": name}
    if options is not None:
        form["options"] = json.dumps(options)
    return form


async def _upload(
    tenant: Tenant, fmt: str, name: str, data: bytes, options: dict[str, Any] | None = None
) -> httpx.Response:
    return await tenant.client.post(
        "/v1/ingest", data=_form(fmt, name, options), files={"file": (name, data)}
    )


def _payload_of(job: Any) -> dict[str, Any]:
    return dict(json.loads(job.payload_json))


def _mixed_bytes(size: int) -> bytes:
    """Deterministic bytes that are not all one value (chunk mix-ups would show)."""
    block = bytes(range(256)) * 4096  # 1 MiB
    return b"".join(block[i % 251 :] + block[: i % 251] for i in range(size // MiB + 1))[:size]


async def test_upload_is_stored_and_fetched_in_chunks(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    data = _mixed_bytes(3 * MiB + 12_345)
    resp = await _upload(tenant, "csv", "big.csv", data, {"delimiter": ";"})
    assert resp.status_code == 202, resp.text
    posted = resp.json()
    job = await worker.next_job(["csv"])
    payload = _payload_of(job)
    digest = blake3.blake3(data).hexdigest()
    # The payload references the stored bytes instead of embedding them.
    assert payload["content_b64"] == "" and payload["content_ref"] == digest
    assert payload["content_hash"] == digest and payload["size"] == len(data)
    assert payload["options"] == {"delimiter": ";"} and payload["name"] == "big.csv"

    chunks = await worker.fetch(job)
    assert [c[0] for c in chunks] == [0, MiB, 2 * MiB, 3 * MiB]
    assert all(len(c[1]) <= MiB for c in chunks) and {c[2] for c in chunks} == {len(data)}
    assert b"".join(c[1] for c in chunks) == data
    # Resume from an offset inside a chunk.
    resumed = await worker.fetch(job, MiB + 7)
    assert resumed[0][0] == MiB + 7 and b"".join(c[1] for c in resumed) == data[MiB + 7 :]
    # Only the lease holder may read; past the end is NOT_FOUND.
    with pytest.raises(GRPCError) as stale:
        await worker.fetch(job, generation=job.lease_generation + 1)
    assert stale.value.status is Status.FAILED_PRECONDITION
    with pytest.raises(GRPCError) as past:
        await worker.fetch(job, len(data) + 1)
    assert past.value.status is Status.NOT_FOUND
    await worker.fail(job, "corrupt_input: test done", permanent=True)
    await wait_job(tenant.client, posted["jobId"], "dead")


async def test_inline_job_has_nothing_to_fetch(tenant: Tenant, worker: ScriptedWorker) -> None:
    await tenant.post("csv", "small.csv", "a\n1\n")
    job = await worker.next_job(["csv"])
    assert _payload_of(job)["content_ref"] is None
    with pytest.raises(GRPCError) as inline:
        await worker.fetch(job)
    assert inline.value.status is Status.NOT_FOUND
    await worker.fail(job, "corrupt_input: test done", permanent=True)


async def test_over_the_limit_is_413_and_stores_nothing(tenant: Tenant, queue_srv: Server) -> None:
    data = b"x" * (MAX_UPLOAD + 1)
    resp = await _upload(tenant, "csv", "huge.csv", data)
    assert resp.status_code == 413, resp.text
    error = resp.json()["error"]
    assert error["code"] == "PAYLOAD_TOO_LARGE" and "max_upload_bytes" in error["message"]
    # Nothing is left behind: no source, no half-received file.
    listing = await tenant.client.get("/v1/nodes", params={"label": "DOCUMENT"})
    assert listing.json()["nodes"] == []
    assert list((queue_srv.db.parent / "uploads").glob("upload-*")) == []


async def test_exactly_the_limit_is_accepted(tenant: Tenant, worker: ScriptedWorker) -> None:
    resp = await _upload(tenant, "tsv", "edge.tsv", b"y" * MAX_UPLOAD)
    assert resp.status_code == 202, resp.text
    job = await worker.next_job(["tsv"])
    assert sum(len(c[1]) for c in await worker.fetch(job)) == MAX_UPLOAD
    await worker.fail(job, "corrupt_input: test done", permanent=True)


async def test_reupload_is_deduplicated_pending_and_after_completion(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    data = b"id,v\n1,2\n"
    first = (await _upload(tenant, "csv", "same.csv", data)).json()
    again = await _upload(tenant, "csv", "same.csv", data)
    assert again.status_code == 200 and again.json()["jobId"] == first["jobId"]
    job = await worker.next_job(["csv"])
    text = "id\tv\n1\t2"
    sub = {
        "v": 1,
        "canonicalText": text,
        "spans": [{"start": 0, "end": len(text), "kind": "body"}],
        "nodes": [{"labels": ["TABLE"], "properties": {}, "spanRefs": [0]}],
    }
    assert (await worker.submit(job, sub)).accepted
    done = await wait_job(tenant.client, first["jobId"], "completed")
    assert transitions(done)[-1] == "completed"
    after = await _upload(tenant, "csv", "same.csv", data)
    assert after.status_code == 200
    assert after.json() == {"deduplicated": True, "sourceId": first["sourceId"]}
    source = (await tenant.client.get(f"/v1/sources/{first['sourceId']}")).json()
    assert len(source["versions"]) == 1 and source["versions"][0]["size"] == len(data)


async def test_json_through_multipart_is_applied_synchronously(tenant: Tenant) -> None:
    resp = await _upload(tenant, "json", "risks.json", b'[{"title": "a"}, {"title": "b"}]')
    assert resp.status_code == 201, resp.text
    assert len(resp.json()["nodeIds"]) == 2


@pytest.mark.parametrize(
    ("form", "files", "status", "code", "message"),
    [
        ({"format": "csv", "name": "a.csv"}, None, 400, "INVALID_CONTENT", "'file' part"),
        ({"name": "a.csv"}, "x", 400, "INVALID_REQUEST", "'format' is required"),
        ({"format": "csv"}, "x", 400, "INVALID_REQUEST", "'name' is required"),
        ({"format": "nope", "name": "a"}, "x", 400, "INVALID_REQUEST", "unknown format"),
        ({"format": "csv", "name": "a", "options": "{"}, "x", 400, "INVALID_REQUEST", "JSON"),
        ({"format": "csv", "name": "a", "options": "[1]"}, "x", 400, "INVALID_REQUEST", "object"),
        ({"format": "csv", "name": "a", "colour": "red"}, "x", 400, "INVALID_REQUEST", "colour"),
        ({"format": "web", "name": "http://127.0.0.1/"}, "x", 400, "INVALID_REQUEST", "no file"),
    ],
)
async def test_bad_forms_are_typed_errors(
    tenant: Tenant,
    form: dict[str, str],
    files: str | None,
    status: int,
    code: str,
    message: str,
) -> None:
    resp = await tenant.client.post(
        "/v1/ingest", data=form, files={"file": ("f", files.encode())} if files else None
    )
    if files is None:  # httpx sends a plain urlencoded form without files; force multipart
        resp = await tenant.client.post(
            "/v1/ingest",
            content=b'--B\r\nContent-Disposition: form-data; name="format"\r\n\r\ncsv\r\n'
            b'--B\r\nContent-Disposition: form-data; name="name"\r\n\r\na.csv\r\n--B--\r\n',
            headers={"content-type": "multipart/form-data; boundary=B"},
        )
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == code and message in error["message"]


async def test_truncated_and_boundaryless_bodies_are_refused(tenant: Tenant) -> None:
    truncated = b'--B\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nabc'
    resp = await tenant.client.post(
        "/v1/ingest",
        content=truncated,
        headers={"content-type": "multipart/form-data; boundary=B"},
    )
    assert resp.status_code == 400 and "closing boundary" in resp.json()["error"]["message"]
    resp = await tenant.client.post(
        "/v1/ingest", content=b"x", headers={"content-type": "multipart/form-data"}
    )
    assert resp.status_code == 400 and "boundary" in resp.json()["error"]["message"]


def test_remote_worker_fetches_uploaded_content(tmp_path: Path, engine: str) -> None:
    """A real ``python -m workers_common.run text_worker`` process reads a 2.5 MiB upload
    through FetchContent (three chunks) and projects it."""
    with InProcessServer(write_config(tmp_path, engine, workers={"in_process": []})) as server:
        key = server.create_key("t", "o")
        spool = tmp_path / "spool"
        spool.mkdir()
        # A spool file a killed worker left behind (its pid is gone) is swept at start.
        stale = spool / "telha-fetch-999999999-abc"
        stale.write_bytes(b"left over")
        env = server.worker_env(Scope("t", "o"), TMPDIR=str(spool))
        paragraphs = [f"Paragraph {i} é {'w' * 90}" for i in range(25_000)]
        text = "\n\n".join(paragraphs)
        assert len(text.encode()) > 2 * MiB
        with (tmp_path / "worker.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "workers_common.run", "text_worker"], env=env, stderr=log
            )
            try:
                with httpx.Client(
                    base_url=server.base_url, headers={"x-api-key": key}, timeout=30
                ) as c:
                    posted = c.post(
                        "/v1/ingest",
                        data={"format": "text", "name": "long.txt"},
                        files={"file": ("long.txt", text.encode())},
                    ).json()
                    job = wait_job_blocking(c, posted["jobId"])
                    assert job["state"] == "completed", job
                    assert job["stats"] == {
                        "blocks": 25_000, "bytes": len(text.encode()), "nodes_added": 25_001,
                        "nodes_removed": 0, "nodes_changed": 0, "nodes_unchanged": 0,
                    }  # fmt: skip
                    version = c.get(f"/v1/sources/{posted['sourceId']}").json()["versions"][0]
                    got = c.get(
                        f"/v1/sources/{posted['sourceId']}/versions/{version['sourceVersionTx']}/text"
                    ).content
                    assert got == text.encode()
            finally:
                proc.terminate()
                proc.wait(10)
        # The job's spool file is gone once the job is done, and so is the stale one.
        assert list(spool.iterdir()) == []
        assert server.stop() == 0, server.log_text()


def test_in_process_worker_fetches_uploaded_content(tmp_path: Path, engine: str) -> None:
    config = write_config(tmp_path, engine, workers={"in_process": ["text_worker"]})
    with InProcessServer(config) as server:
        key = server.create_key("t", "o")
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}, timeout=30) as c:
            body = b"# Title\n\nBody text.\n" * 1
            posted = c.post(
                "/v1/ingest",
                data={"format": "markdown", "name": "doc.md"},
                files={"file": ("doc.md", body)},
            ).json()
            job = wait_job_blocking(c, posted["jobId"])
            assert job["state"] == "completed", job
            nodes = c.get("/v1/nodes", params={"sourceId": posted["sourceId"]}).json()["nodes"]
            assert sorted(n["labels"][0] for n in nodes) == ["DOCUMENT", "PARAGRAPH", "SECTION"]
        assert server.stop() == 0, server.log_text()


async def test_the_same_upload_twice_at_once_is_stored_once_and_enqueued_once(
    tenant: Tenant, worker: ScriptedWorker
) -> None:
    data = _mixed_bytes(3 * MiB + 5)
    answers: list[httpx.Response] = []

    async def post() -> None:
        answers.append(await _upload(tenant, "csv", "twice.csv", data))

    async with anyio.create_task_group() as tg:
        tg.start_soon(post)
        tg.start_soon(post)
    assert sorted(a.status_code for a in answers) == [200, 202], [a.text for a in answers]
    assert len({a.json()["jobId"] for a in answers}) == 1
    job = await worker.next_job(["csv"])
    assert b"".join(c[1] for c in await worker.fetch(job)) == data
    await worker.fail(job, "corrupt_input: test done", permanent=True)
