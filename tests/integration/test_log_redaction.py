"""Structured logs of a real ``telha serve`` and a remote worker: no API key,
no worker token and no content bytes ever reach a log line, even at ``--log-level debug``;
every line about a job carries ``job_id``, ``kind``, ``source_id``, ``attempt`` and scope."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from telha.domain.model import Scope
from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

JOB_FIELDS = ("job_id", "kind", "source_id", "attempt", "tenant_id", "organization_id")
#: Events that are about one job, whichever process logs them.
JOB_EVENTS = {"job_completed", "job_failed", "partial_applied", "enqueued", "lease_expired"}


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[ServerProcess]:
    """Debug-level logs; tsv jobs run in-process (a streaming worker), text jobs remotely."""
    config = write_config(
        tmp_path, workers={"in_process": ["tests.support.stream_worker"], "concurrency": 1}
    )
    with ServerProcess(config, serve_args=("--log-level", "debug")) as proc:
        yield proc


def _spawn_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "workers_common.run", "text_worker", "--log-level", "debug"],
            env=env,
            stdout=out,
            stderr=out,
        )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.terminate()
    return proc.wait(20)


def _json_lines(text: str) -> list[dict[str, object]]:
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


async def test_logs_hold_no_secrets_or_content_and_job_lines_carry_the_job(
    srv: ServerProcess, tmp_path: Path
) -> None:
    scope = Scope(f"tenant-{uuid.uuid4()}", "org-logs")
    key = srv.create_key(scope.tenant_id, scope.organization_id)
    env = srv.worker_env(scope)
    token = env["TELHA_WORKER_TOKEN"]
    marker = f"content-marker-{uuid.uuid4().hex}"
    worker_log = tmp_path / "worker.log"
    worker = _spawn_worker(env, worker_log)
    contents = {
        "json": json.dumps([{"note": marker}, {"note": f"{marker}-2"}]),
        "text": f"hello {marker}\n\nsecond paragraph {marker}\n",
        "tsv": "\n".join(f"{marker}\t{i}" for i in range(25)),
    }
    try:
        async with httpx.AsyncClient(
            base_url=srv.base_url, headers={"x-api-key": key}, timeout=30
        ) as api:
            created = await api.post(
                "/v1/ingest", json={"format": "json", "name": "m.json", "content": contents["json"]}
            )
            assert created.status_code == 201, created.text
            jobs = {}
            for fmt in ("text", "tsv"):
                resp = await api.post(
                    "/v1/ingest", json={"format": fmt, "name": f"m.{fmt}", "content": contents[fmt]}
                )
                assert resp.status_code == 202, resp.text
                jobs[fmt] = resp.json()["jobId"]
            upload = await api.post(
                "/v1/ingest",
                data={"format": "text", "name": "up.txt"},
                files={"file": ("up.txt", f"uploaded {marker}\n".encode())},
            )
            assert upload.status_code == 202, upload.text
            jobs["upload"] = upload.json()["jobId"]
            bad = base64.b64encode(marker.encode() + b"\xff\xfe").decode()
            failing = await api.post(
                "/v1/ingest", json={"format": "text", "name": "bad.txt", "contentBase64": bad}
            )
            assert failing.status_code == 202, failing.text
            for job_id in jobs.values():
                done = await wait_job(api, job_id, within_s=30)
                assert done["state"] == "completed", done
            dead = await wait_job(api, failing.json()["jobId"], within_s=30)
            assert dead["state"] == "dead", dead
            # A request with a wrong key is refused (and its key not logged either).
            assert (await api.get("/v1/nodes", headers={"x-api-key": key + "x"})).status_code == 401
    finally:
        assert _stop(worker) == 0
    assert srv.stop() == 0
    server_text = srv.log_text()
    worker_text = worker_log.read_text(errors="replace")
    for name, text in (("server", server_text), ("worker", worker_text)):
        assert text.strip(), f"{name} log is empty"
        assert key not in text, f"API key in the {name} log"
        assert token not in text, f"worker token in the {name} log"
        assert marker not in text, f"content in the {name} log"
        for content in contents.values():
            assert base64.b64encode(content.encode()).decode() not in text

    server_lines = _json_lines(server_text)
    assert len(server_lines) == len(server_text.splitlines())  # JSON lines, every one
    about_jobs = [line for line in server_lines if line.get("event") in JOB_EVENTS]
    events = {str(line["event"]) for line in about_jobs}
    assert {"job_completed", "job_failed", "partial_applied", "enqueued"} <= events
    for line in about_jobs:
        missing = [f for f in JOB_FIELDS if line.get(f) is None]
        assert not missing, (missing, line)
        assert line["tenant_id"] == scope.tenant_id
        assert line["organization_id"] == scope.organization_id
        assert isinstance(line["attempt"], int) and line["attempt"] >= 1
    completed = {line["job_id"] for line in about_jobs if line["event"] == "job_completed"}
    assert set(jobs.values()) <= completed

    worker_lines = _json_lines(worker_text)
    job_lines = [line for line in worker_lines if "job_id" in line]
    assert job_lines, worker_text
    for line in job_lines:
        assert all(line.get(f) is not None for f in JOB_FIELDS), line
    assert {line["job_id"] for line in job_lines} >= {jobs["text"], jobs["upload"]}
    failure = [line for line in job_lines if "failed" in str(line["event"])]
    assert failure and failure[0]["job_id"] == failing.json()["jobId"]
