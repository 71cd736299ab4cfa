"""What a new user meets first on the server, against a real ``telha serve`` on each engine
(docs/rest-api.md, docs/operations.md): options, names and format names checked at request
time for every format (declared once, :mod:`workers_common.format_options`); the ``hint`` of
a job no worker polls and ``/readyz``'s formats, with a remote worker over gRPC; the access
log (one line per request, 4xx included, never a key) and a dead job logged once; an
erasure's dry run and the sources' names in its answer."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.support.inproc import InProcessServer
from tests.support.server import write_config
from tests.support.wait import wait_job
from tests.support.worker import scripted_worker

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("first-hour")
    # Only the text worker runs in-process: no worker polls the tabular formats until the
    # test starts one remotely.
    config = write_config(folder, engine, workers={"in_process": ["text_worker"], "concurrency": 1})
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


def _refused(resp: httpx.Response, *naming: str) -> str:
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "INVALID_REQUEST", error
    for word in naming:
        assert word in error["message"], error
    return str(error["message"])


async def _post(client: httpx.AsyncClient, fmt: str, name: str, **extra: Any) -> httpx.Response:
    body = {"format": fmt, "name": name, "content": extra.pop("content", "a,b\n1,2\n"), **extra}
    return await client.post("/v1/ingest", json=body)


async def test_unknown_and_ill_typed_options_are_refused_before_a_job(
    client: httpx.AsyncClient,
) -> None:
    # No tabular worker runs: core alone knows what a CSV job takes.
    message = _refused(
        await _post(client, "csv", "a.csv", options={"delimeter": ";"}), "options.delimeter"
    )
    assert "unknown option" in message and "delimiter" in message
    _refused(
        await _post(client, "csv", "a.csv", options={"rows_per_partial": "ten"}),
        "options.rows_per_partial",
    )
    _refused(await _post(client, "tsv", "a.tsv", options={"header": "maybe"}), "options.header")
    _refused(
        await _post(client, "text", "a.txt", content="hi", options={"clarify": True}),
        "options.clarify",
    )
    _refused(await _post(client, "pdf", "a.pdf", options={"clarify": "yes"}), "options.clarify")
    _refused(
        await _post(client, "code", "a.py", content="x = 1", options={"language": "cobol"}),
        "options.language",
    )
    _refused(await _post(client, "eml", "a.eml", options={"lang": "pt"}), "options.lang")
    _refused(
        await client.post(
            "/v1/ingest",
            json={
                "format": "web",
                "name": "http://127.0.0.1:9/",
                "options": {"crawl": {"max_dept": 1}},
            },
        ),
        "options.crawl.max_dept",
    )
    _refused(
        await _post(client, "csv", "a.csv", options={"webhook": {"url": "ftp://x"}}),
        "options.webhook",
    )
    # A web name that is not an absolute http(s) URL.
    for name in ("site.localhost/page", "ftp://site.localhost/", "/index.html", "http://"):
        _refused(await client.post("/v1/ingest", json={"format": "web", "name": name}), "name")
    # The same checks on a multipart upload.
    resp = await client.post(
        "/v1/ingest",
        data={"format": "csv", "name": "up.csv", "options": json.dumps({"delimeter": ";"})},
        files={"file": ("up.csv", b"a;b\n1;2\n")},
    )
    _refused(resp, "options.delimeter")
    # Nothing was enqueued by any of them.
    jobs = (await client.get("/v1/ingest")).json()["jobs"]
    assert jobs == []
    # Good options (and a null, which counts as absent) are accepted.
    resp = await _post(client, "csv", "ok.csv", options={"delimiter": ",", "label": None})
    assert resp.status_code == 202, resp.text


async def test_format_names_are_case_insensitive_with_aliases(client: httpx.AsyncClient) -> None:
    for fmt, name, kind in (("MD", "a.md", "ingest:markdown"), ("Text", "b.txt", "ingest:text"),
                            ("txt", "c.txt", "ingest:text"), ("CSV", "d.csv", "ingest:csv"),
                            ("htm", "e.htm", "ingest:html")):  # fmt: skip
        resp = await _post(client, fmt, name, content=f"# {name}\n")
        assert resp.status_code == 202, (fmt, resp.text)
        job = (await client.get(resp.json()["statusUrl"])).json()
        assert job["kind"] == kind
    resp = await client.post(
        "/v1/ingest",
        data={"format": "Md", "name": "up.md"},
        files={"file": ("up.md", b"# Up\n")},
    )
    assert resp.status_code == 202, resp.text
    message = _refused(await _post(client, "docx2", "a.docx"), "unknown format 'docx2'")
    assert "markdown" in message and "csv" in message


async def test_a_job_no_worker_polls_carries_a_hint_until_one_does(
    server: InProcessServer, client: httpx.AsyncClient
) -> None:
    ready = (await client.get("/readyz")).json()
    assert ready == {"status": "ready", "formats": ["markdown", "text"]}
    resp = await _post(client, "tsv", "orphan.tsv", content="a\tb\n1\t2\n")
    assert resp.status_code == 202, resp.text
    job = (await client.get(resp.json()["statusUrl"])).json()
    assert job["state"] == "pending"
    assert job["hint"] == "no worker polls format tsv"
    # A format that has its poller gets no hint.
    text = await _post(client, "text", "polled.txt", content="hello")
    done = await wait_job(client, text.json()["jobId"])
    assert done["state"] == "completed" and done["hint"] is None
    # A remote worker over gRPC polls the tabular formats: the job is taken, readyz says so.
    worker = server.spawn_worker("tabular_worker", None, stderr=subprocess.DEVNULL)
    try:
        finished = await wait_job(client, resp.json()["jobId"])
        assert finished["state"] == "completed" and finished["hint"] is None
        ready = (await client.get("/readyz")).json()
        assert {"csv", "tsv", "xlsx", "markdown", "text"} <= set(ready["formats"])
    finally:
        worker.terminate()
        worker.wait(30)


def _log_events(server: InProcessServer) -> list[dict[str, Any]]:
    events = []
    for line in server.log_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


async def test_every_request_is_logged_once_without_its_key(server: InProcessServer) -> None:
    tenant = f"log-{uuid.uuid4()}"
    key = server.create_key(tenant, "org")
    marker = f"secret-{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as client:
        unknown = await client.get("/v1/sources", headers={"x-api-key": marker})
        assert unknown.status_code == 401
        bad = await client.post(
            "/v1/ingest", json={"format": "csv", "name": "x.csv", "content": marker, "nope": 1}
        )
        assert bad.status_code == 400
        assert (await client.get(f"/v1/ingest/{uuid.uuid4()}")).status_code == 404
        assert (await client.get("/v1/sources")).status_code == 200
    with anyio.fail_after(10):
        while True:
            requests = [e for e in _log_events(server) if e.get("event") == "request"]
            ours = [e for e in requests if e.get("tenant_id") == tenant]
            if any(e["status"] == 200 for e in ours):
                break
            await anyio.sleep(0.05)
    assert [(e["method"], e["route"], e["status"]) for e in ours] == [
        ("POST", "/v1/ingest", 400),
        ("GET", "/v1/ingest/{job_id}", 404),
        ("GET", "/v1/sources", 200),
    ]
    assert all(e["organization_id"] == "org" and e["level"] == "info" for e in ours)
    assert all(isinstance(e["duration_ms"], float | int) for e in ours)
    unauthenticated = [e for e in requests if e["status"] == 401 and e["route"] == "/v1/sources"]
    assert unauthenticated and "tenant_id" not in unauthenticated[-1]
    text = server.log_text()
    assert key not in text and marker not in text


async def test_a_dead_job_is_logged_once(
    server: InProcessServer, client: httpx.AsyncClient
) -> None:
    body = {
        "format": "text",
        "name": "bad.txt",
        "contentBase64": base64.b64encode(b"\xff\xfe").decode(),
    }
    resp = await client.post("/v1/ingest", json=body)
    assert resp.status_code == 202, resp.text
    job_id = resp.json()["jobId"]
    job = await wait_job(client, job_id)
    assert job["state"] == "dead" and job["failureReason"].startswith("corrupt_input")
    await anyio.sleep(0.5)  # the worker's own line, if any, is written after it submitted
    lines = [line for line in server.log_text().splitlines() if job_id in line]
    failures = [line for line in lines if "fail" in line]
    assert len(failures) == 1, failures


async def test_an_invalid_submission_is_logged_once(
    server: InProcessServer, client: httpx.AsyncClient
) -> None:
    posted = await _post(client, "code", "invalid.py", content="x = 1")
    job_id = posted.json()["jobId"]
    token = server.worker_token(None)
    async with scripted_worker(server.grpc_addr, token) as worker:
        job = await worker.next_job(["code"])
        assert (await worker.submit(job, {"v": 2})).accepted is False
    dead = await wait_job(client, job_id)
    assert dead["state"] == "dead" and dead["failureReason"].startswith("invalid_submission")
    lines = [json.loads(line) for line in server.log_text().splitlines() if job_id in line]
    failed = [e for e in lines if "fail" in e["event"] or "invalid" in e["event"]]
    assert len(failed) == 1, failed
    assert failed[0]["failure_kind"] == "invalid_submission" and failed[0]["reason"]


async def _json_source(client: httpx.AsyncClient, name: str, records: list[dict[str, Any]]) -> str:
    resp = await client.post(
        "/v1/ingest", json={"format": "json", "name": name, "content": json.dumps(records)}
    )
    assert resp.status_code == 201, resp.text
    return str(resp.json()["sourceId"])


async def test_an_erasure_dry_run_shows_its_reach_and_erases_nothing(
    client: httpx.AsyncClient,
) -> None:
    records = [{"name": "Ana Lima", "nif": "123"}, {"name": "Rui Sousa", "nif": "456"}]
    first = await _json_source(client, "people/a.json", records)
    copy = await _json_source(client, "backup/a-copy.json", records)  # the same bytes
    other = await _json_source(client, "people/b.json", [{"name": "Eva"}])
    url = f"/v1/sources/{first}/erase"
    preview = await client.post(url, params={"dryRun": "true"})
    assert preview.status_code == 200, preview.text
    body = preview.json()
    assert body["dryRun"] is True and body["sourceId"] == first and body["versionTx"] is None
    by_id = {s["sourceId"]: s for s in body["sources"]}
    assert set(by_id) == {first, copy}
    assert by_id[first]["name"] == "people/a.json"
    assert by_id[copy]["name"] == "backup/a-copy.json"
    for source in by_id.values():
        assert len(source["versions"]) == 1 and source["nodes"] == 2
        assert source["versions"][0]["nodes"] == 2
    assert body["nodes"] == 4 and len(body["versions"]) == 2
    # Nothing was erased: the versions and nodes are all there, a second dry run agrees.
    for sid in (first, copy):
        source = (await client.get(f"/v1/sources/{sid}")).json()
        assert source["state"] == "current" and source["versions"][0]["erased"] is False
    nodes = (await client.get("/v1/nodes", params={"sourceId": copy})).json()["nodes"]
    assert len(nodes) == 2
    again = await client.post(url, params={"dryRun": "true"}, json={"reason": "check"})
    assert again.json() == body
    # One version only, by versionTx; bad input.
    tx = by_id[first]["versions"][0]["sourceVersionTx"]
    one = await client.post(url, params={"dryRun": "true"}, json={"versionTx": tx})
    assert one.status_code == 200 and one.json()["versionTx"] == tx
    bad = await client.post(url, params={"dryRun": "yes"})
    _refused(bad, "dryRun")
    missing = await client.post(f"/v1/sources/{uuid.uuid4()}/erase", params={"dryRun": "true"})
    assert missing.status_code == 404
    # The real erase lists the sources' names; afterwards a dry run has nothing left.
    erased = await client.post(url, json={"reason": "GDPR request"})
    assert erased.status_code == 200, erased.text
    names = {s["sourceId"]: s["name"] for s in erased.json()["sources"]}
    assert names == {first: "people/a.json", copy: "backup/a-copy.json"}
    after = (await client.post(url, params={"dryRun": "true"})).json()
    assert after["sources"] == [] and after["versions"] == [] and after["nodes"] == 0
    assert (await client.get(f"/v1/sources/{other}")).json()["state"] == "current"
