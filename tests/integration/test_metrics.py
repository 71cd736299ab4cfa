"""``GET /metrics`` of a real ``telha serve``, parsed with prometheus-client's
own parser: counters move as jobs run, REST routes are labelled by template; and a remote
worker started with ``--http-port 0`` serves ``/health`` and ``/metrics``."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from telha.domain.model import Scope
from tests.support.inproc import InProcessServer
from tests.support.metrics import parse, scrape, value
from tests.support.server import write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

TEMPLATES = {
    "/healthz", "/readyz", "/metrics", "/openapi.json", "/v1/ingest", "/v1/ingest/{job_id}",
    "/v1/ingest/{job_id}/events",
    "/v1/sources/{source_id}", "/v1/sources/{source_id}/versions/{tx}/text",
    "/v1/sources/{source_id}/versions/{tx}/spans", "/v1/nodes", "/v1/nodes/{node_id}",
    "/v1/nodes/{node_id}/edges", "<unmatched>",
}  # fmt: skip


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """In-process ``text_worker`` (text, markdown); tsv is left to a remote worker."""
    folder = tmp_path_factory.mktemp("metrics")
    config = write_config(folder, workers={"in_process": ["text_worker"], "concurrency": 1})
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
async def api(srv: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    key = srv.create_key(f"t-{uuid.uuid4()}", "org")
    async with httpx.AsyncClient(
        base_url=srv.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield c


async def post(api: httpx.AsyncClient, **body: object) -> dict[str, object]:
    resp = await api.post("/v1/ingest", json=body)
    assert resp.status_code in (200, 201, 202), resp.text
    return dict(resp.json())


async def test_counters_move_as_jobs_run(srv: InProcessServer, api: httpx.AsyncClient) -> None:
    before = await scrape(srv.base_url)
    await post(api, format="json", name="m.json", content='[{"a": 1}]')
    await post(api, format="json", name="m.json", content='[{"a": 1}]')  # request-level dedup
    texts = ["one\n\ntwo\n", "three\n", "four\n\nfive\n\nsix\n"]
    jobs = [
        await post(api, format="text", name=f"m{i}.txt", content=t) for i, t in enumerate(texts)
    ]
    for job in jobs:
        await wait_job(api, str(job["jobId"]), "completed")
    bad = await post(
        api, format="text", name="bad.txt", contentBase64=base64.b64encode(b"\xff\xfe").decode()
    )
    await wait_job(api, str(bad["jobId"]), "dead")
    await api.get(f"/v1/nodes/{uuid.uuid4()}")  # 404 through a templated route
    await api.get("/v1/no/such/route")
    after = await scrape(srv.base_url)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    kind = {"kind": "ingest:text"}
    assert delta("telha_ingest_requests_total", format="json", outcome="created") == 1
    assert delta("telha_ingest_requests_total", format="json", outcome="deduplicated") == 1
    assert delta("telha_ingest_requests_total", format="text", outcome="enqueued") == 4
    assert delta("telha_dedup_hits_total", stage="request", kind="json") == 1
    sent = sum(len(t.encode()) for t in texts) + 2
    assert delta("telha_ingested_bytes_total", format="text") == sent
    assert delta("telha_ingested_bytes_total", format="json") == len(b'[{"a": 1}]')
    assert delta("telha_leases_granted_total", **kind) == 4
    assert delta("telha_job_transitions_total", transition="leased", **kind) == 4
    assert delta("telha_job_transitions_total", transition="completed", **kind) == 3
    assert delta("telha_job_transitions_total", transition="dead", **kind) == 1
    assert delta("telha_submissions_applied_total", **kind) == 3
    assert delta("telha_lease_to_submit_seconds_count", **kind) == 4
    assert delta("telha_lease_to_submit_seconds_sum", **kind) > 0
    # Canonical bytes of the three new versions (the failed job wrote nothing).
    assert delta("telha_canonical_bytes_total", **kind) == sum(len(t.encode()) for t in texts)
    # text_worker reports {"blocks": n, "bytes": n} with each submission.
    assert delta("telha_worker_stat_count", stat="blocks", **kind) == 3
    assert delta("telha_worker_stat_sum", stat="blocks", **kind) == 2 + 1 + 3
    assert value(after, "telha_jobs", state="pending", **kind) == 0
    assert value(after, "telha_jobs", state="leased", **kind) == 0
    assert value(after, "telha_channel_capacity", channel="storage.readers") >= 1
    assert ("telha_storage_writer_waiting", frozenset()) in after

    routes = {dict(labels).get("route") for name, labels in after if name.startswith("telha_http")}
    assert routes - {None} <= TEMPLATES  # never a raw path with an id in it
    requests = "telha_http_requests_total"
    assert delta(requests, method="GET", route="/v1/ingest/{job_id}", status="200") >= 4
    # wait_job follows each job's event stream (AsyncTelha.wait).
    assert delta(requests, method="GET", route="/v1/ingest/{job_id}/events", status="200") >= 4
    assert delta(requests, method="GET", route="/v1/nodes/{node_id}", status="404") == 1
    assert delta(requests, method="GET", route="<unmatched>", status="404") == 1
    assert delta(requests, method="POST", route="/v1/ingest", status="202") == 4
    seconds = "telha_http_request_duration_seconds_count"
    assert delta(seconds, method="POST", route="/v1/ingest") == 6


async def test_wrong_method_is_labelled_with_its_route(srv: InProcessServer) -> None:
    async with httpx.AsyncClient(base_url=srv.base_url) as anon:
        before = await scrape(srv.base_url)
        assert (await anon.delete("/v1/ingest")).status_code == 405
        after = await scrape(srv.base_url)
    labels = {"method": "DELETE", "route": "/v1/ingest", "status": "405"}
    assert value(after, "telha_http_requests_total", **labels) == (
        value(before, "telha_http_requests_total", **labels) + 1
    )


def _logged_port(log: Path, proc: subprocess.Popen[bytes]) -> int | None:
    """The port a worker logged in its ``http_listening`` line, if it has yet."""
    text = log.read_text(errors="replace")
    for line in text.splitlines():
        if '"http_listening"' in line:
            event = json.loads(line)
            assert event["host"] == "127.0.0.1"
            return int(event["port"])
    assert proc.poll() is None, text
    return None


def _spawn(srv: InProcessServer, scope: Scope, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``python -m workers_common.run ARGS`` against ``srv``, stdout and stderr to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "workers_common.run", *args],
            env=srv.worker_env(scope),
            stdout=out,
            stderr=out,
        )


async def _http_port(log: Path, proc: subprocess.Popen[bytes]) -> int:
    with anyio.fail_after(30):
        while (port := _logged_port(log, proc)) is None:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    return port


async def _worker_jobs(w: httpx.AsyncClient, **labels: str) -> float:
    return value(parse((await w.get("/metrics")).text), "telha_worker_jobs_total", **labels)


async def test_remote_worker_serves_health_and_metrics(
    srv: InProcessServer, tmp_path: Path
) -> None:
    scope = Scope(f"t-{uuid.uuid4()}", "org")
    key = srv.create_key(scope.tenant_id, scope.organization_id)
    log = tmp_path / "worker.log"
    proc = _spawn(srv, scope, log, "tests.support.stream_worker", "--http-port", "0")
    try:
        port = await _http_port(log, proc)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as w:
            health = await w.get("/health")
            assert health.status_code == 200
            assert health.json()["status"] == "ok" and health.json()["formats"] == ["tsv"]
            assert (await w.get("/nope")).status_code == 404
            async with httpx.AsyncClient(
                base_url=srv.base_url, headers={"x-api-key": key}, timeout=30
            ) as api:
                rows = "\n".join(f"r{i}\t{i}" for i in range(25))
                job = await post(api, format="tsv", name="rows.tsv", content=rows)
                await wait_job(api, str(job["jobId"]), "completed")
            labels = {"kind": "ingest:tsv", "outcome": "submitted"}
            with anyio.fail_after(30):  # the worker counts once core answered
                while await _worker_jobs(w, **labels) < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            samples = parse((await w.get("/metrics")).text)
        assert value(samples, "telha_worker_job_seconds_count", kind="ingest:tsv") == 1
        assert value(samples, "telha_worker_jobs_in_flight") == 0
        assert value(samples, "telha_worker_polling") == 1
        assert value(samples, "telha_worker_connects_total") >= 1
        server = await scrape(srv.base_url)
        assert value(server, "telha_partials_applied_total", kind="ingest:tsv") >= 2
    finally:
        proc.terminate()
        assert proc.wait(20) == 0, log.read_text(errors="replace")
