"""``telha serve`` as a process: config errors, keys from the CLI, restart, graceful shutdown."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support.server import ServerProcess, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio


def _telha(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True, timeout=60
    )


def _runner(worker: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m workers_common.run WORKER`` to completion under ``env`` (a 60 s cap)."""
    return subprocess.run(
        [sys.executable, "-m", "workers_common.run", worker],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[server]\nrest_adr = '127.0.0.1:0'\n", "server.rest_adr"),
        ("[jobs]\nmax_attempts = 'five'\n", "jobs.max_attempts"),
        ("[storage]\nsynchronous = 'sometimes'\n", "storage.synchronous"),
        ("[nonsense]\n", "nonsense"),
        ("[server]\nrest_addr = 'no-port'\n", "server.rest_addr"),
        ("[ingest]\nmax_body_bytes = 0\n", "ingest.max_body_bytes"),
        ("[ingest]\nmax_upload_bytes = -1\n", "ingest.max_upload_bytes"),
        ("[docling]\nartifacts_path = '/no/such/models'\n", "docling.artifacts_path"),
    ],
)
def test_bad_config_exits_2_naming_the_key(tmp_path: Path, toml: str, key: str) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(toml)
    result = _telha("serve", "--config", str(cfg))
    assert result.returncode == 2
    assert key in result.stderr
    assert not (tmp_path / "data").exists()  # failed before touching storage


def test_env_override_wrong_type_exits_2(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "telha", "serve", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"TELHA_JOBS__MAX_ATTEMPTS": "many", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2 and "jobs.max_attempts" in result.stderr


@pytest.fixture
async def own_server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    with ServerProcess(write_config(tmp_path)) as proc:
        yield proc


async def test_cli_key_works_at_once_and_restart_keeps_everything(
    own_server: ServerProcess,
) -> None:
    result = _telha(
        "api-key", "create", "--tenant", "t", "--org", "o", "--config", str(own_server.config)
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("telha_")
    key = lines[0]
    raw_db = own_server.db.read_bytes() + own_server.db.with_name("telha.db-wal").read_bytes()
    assert key.encode() not in raw_db  # only the hash is stored
    body = {"format": "json", "name": "keep.json", "content": '[{"a": 1}, {"a": 2}]'}
    async with httpx.AsyncClient(base_url=own_server.base_url, headers={"x-api-key": key}) as c:
        created = (await c.post("/v1/ingest", json=body)).json()
    assert own_server.stop() == 0

    own_server.start()
    async with httpx.AsyncClient(base_url=own_server.base_url, headers={"x-api-key": key}) as c:
        assert (await c.post("/v1/ingest", json=body)).json()["deduplicated"] is True
        node = (await c.get(f"/v1/nodes/{created['nodeIds'][1]}")).json()
        assert node["provenance"]["spans"][0]["text"] == '{"a":2}'
        newer = (await c.post("/v1/ingest", json={**body, "content": '[{"a": 3}]'})).json()
        assert newer["sourceVersionTx"] > created["sourceVersionTx"]  # tx stays increasing
    assert own_server.stop(signal.SIGINT) == 0


async def test_sigterm_lets_an_inflight_ingest_finish(own_server: ServerProcess) -> None:
    key = own_server.create_key("t", "o")
    records = json.dumps([{"i": i, "s": "x" * 50} for i in range(2000)])
    body = json.dumps({"format": "json", "name": "inflight.json", "content": records}).encode()
    half = len(body) // 2
    signalled = anyio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield body[:half]
        await signalled.wait()
        yield body[half:]

    async def sigterm() -> None:
        await anyio.sleep(0.3)  # the first half is on the wire
        assert own_server.proc is not None
        own_server.proc.send_signal(signal.SIGTERM)
        await anyio.sleep(0.2)
        signalled.set()

    async with (
        httpx.AsyncClient(
            base_url=own_server.base_url, headers={"x-api-key": key}, timeout=30
        ) as c,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(sigterm)
        resp = await c.post(
            "/v1/ingest",
            content=slow_body(),
            headers={"content-length": str(len(body)), "content-type": "application/json"},
        )
    assert resp.status_code == 201, resp.text
    assert own_server.stop() == 0
    log = own_server.log_text()
    assert '"shutdown_requested"' in log and '"stopped"' in log

    own_server.start()
    async with httpx.AsyncClient(base_url=own_server.base_url, headers={"x-api-key": key}) as c:
        nodes = (await c.get("/v1/nodes", params={"label": "INFLIGHT", "limit": 1000})).json()
        assert len(nodes["nodes"]) == 1000 and nodes["nextCursor"] is not None


def test_port_in_use_exits_nonzero(tmp_path: Path, server: ServerProcess) -> None:
    taken = server.base_url.removeprefix("http://")
    cfg = write_config(tmp_path, server={"rest_addr": taken})
    result = _telha("serve", "--config", str(cfg))
    assert result.returncode == 1
    assert (
        "Address already in use" in result.stderr
        or "address already in use" in result.stderr.lower()
    )


@pytest.mark.parametrize("command", ["serve", "api-key"])
def test_unopenable_database_fails_fast_with_one_line(tmp_path: Path, command: str) -> None:
    cfg = write_config(tmp_path)
    (tmp_path / "telha.db").write_bytes(b"this is not a SQLite database" * 100)
    args = ["serve"] if command == "serve" else ["api-key", "create", "--tenant", "t", "--org", "o"]
    result = _telha(*args, "--config", str(cfg))  # a hang would hit the 60 s timeout
    assert result.returncode == 1
    assert "storage error" in result.stderr and "Traceback" not in result.stderr


async def test_shutdown_releases_in_process_jobs(tmp_path: Path) -> None:
    """Leased in-process jobs go back to pending at shutdown, the attempt not counted."""
    with ServerProcess(
        write_config(
            tmp_path, workers={"in_process": ["tests.support.slow_worker"], "concurrency": 1}
        )
    ) as server:
        key = server.create_key("t", "o")
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            job_id = (
                await c.post(
                    "/v1/ingest", json={"format": "code", "name": "a.py", "content": "x = 1"}
                )
            ).json()["jobId"]
            assert (await wait_job(c, job_id, "leased", within_s=10))["state"] == "leased"
        assert server.stop() == 0
        assert '"job_released"' in server.log_text()
        server.start()
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            job = (await c.get(f"/v1/ingest/{job_id}")).json()
        transitions = [e["transition"] for e in job["events"]]
        assert transitions[:3] == ["enqueued", "leased", "released"]
        # Not charged: no failed attempt recorded (the restarted pool may hold it again).
        assert not {"retried", "lease_expired", "dead"} & set(transitions)
        assert job["attempts"] == (1 if job["state"] == "leased" else 0)


def test_unknown_in_process_worker_is_a_config_error(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, workers={"in_process": ["no_such_worker"]})
    result = _telha("serve", "--config", str(cfg))
    assert result.returncode == 2 and "workers.in_process" in result.stderr


def test_remote_runner_explains_missing_env_and_retries_unreachable_core(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    result = _runner("text_worker", env)
    assert result.returncode == 2 and "TELHA_GRPC_TARGET" in result.stderr
    bad = _runner("no_such_worker", env)
    assert bad.returncode == 2 and "no_such_worker" in bad.stderr
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**env, "TELHA_GRPC_TARGET": f"127.0.0.1:{port}", "TELHA_WORKER_TOKEN": "x"}
    log = (tmp_path / "w.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "workers_common.run", "text_worker"], stderr=log, env=env
    )
    try:
        deadline = time.monotonic() + 20
        while b"retrying" not in (tmp_path / "w.log").read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert b"core unreachable" in (tmp_path / "w.log").read_bytes()
    finally:
        proc.kill()
        proc.wait()
        log.close()


def test_empty_token_key_file_is_a_config_error(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    (tmp_path / "grpc_token.key").write_text("")
    result = _telha("serve", "--config", str(cfg))
    assert result.returncode == 2 and "grpc.token_key" in result.stderr
    assert "Traceback" not in result.stderr


def test_remote_runner_with_a_rejected_token_exits_2_in_one_line(tmp_path: Path) -> None:
    with ServerProcess(write_config(tmp_path, workers={"in_process": []})) as server:
        env = {
            "PATH": "/usr/bin:/bin",
            "TELHA_GRPC_TARGET": server.grpc_addr,
            "TELHA_WORKER_TOKEN": "forged",
        }
        result = _runner("text_worker", env)
        assert result.returncode == 2 and "UNAUTHENTICATED" in result.stderr
        assert "Traceback" not in result.stderr
