"""``[connectors] secrets`` at the run (docs/connectors.md, "The imap kind"): a connector
whose ``passwordEnv`` is not granted to its scope is refused by the connector worker
before anything connects — the run is dead at once (``corrupt_input``, one attempt), its
reason names the variable and never its value, and a real listener on 127.0.0.1 (where
the settings point, ``allowed_hosts`` admitting it) takes no connection. The server here
lists no grants, so ``POST /v1/connectors`` cannot check and the run check is reached."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support.listener import tcp_listener
from tests.support.server import ServerProcess, write_config

pytestmark = pytest.mark.anyio

_SECRET_ENV = "TELHA_SECRET_IMAP_GRANT_TEST"
_PASSWORD = "hunter2-grant-test"


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on 127.0.0.1 that greets like IMAP and records what it receives."""
    got: list[bytes] = []

    def greet(conn: socket.socket) -> None:
        got.append(b"connected")
        conn.settimeout(2)
        conn.sendall(b"* OK IMAP4rev1 ready\r\n")
        with contextlib.suppress(OSError):
            got.append(conn.recv(4096))

    with tcp_listener(greet) as port:
        yield port, got


async def test_a_secret_not_granted_to_the_run_scope_is_refused_at_run(
    engine: str, tmp_path: Path, listener: tuple[int, list[bytes]]
) -> None:
    port, got = listener
    config = write_config(
        tmp_path, engine, workers={"in_process": ["connectors"]},
        jobs={"max_attempts": 2, "backoff_base_ms": 50, "backoff_max_s": 1},
        connectors={"allowed_hosts": ["127.0.0.1"]},
    )  # fmt: skip
    os.environ[_SECRET_ENV] = _PASSWORD
    try:
        with ServerProcess(config) as proc:
            key = proc.create_key(f"tenant-{uuid.uuid4()}", "org")
            async with httpx.AsyncClient(
                base_url=proc.base_url, headers={"x-api-key": key}, timeout=30
            ) as api:
                settings = {
                    "host": "127.0.0.1", "port": port, "username": "victim",
                    "passwordEnv": _SECRET_ENV, "tls": "none",
                }  # fmt: skip
                made = await api.post("/v1/connectors", json={"kind": "imap", "settings": settings})
                assert made.status_code == 201, made.text
                cid = made.json()["connectorId"]
                started = await api.post(f"/v1/connectors/{cid}/runs", json={})
                assert started.status_code == 202, started.text
                run_id = started.json()["runId"]
                run: dict[str, object] = {}
                for _ in range(600):
                    runs = (await api.get(f"/v1/connectors/{cid}/runs")).json()["runs"]
                    run = next(r for r in runs if r["runId"] == run_id)
                    if run["state"] == "dead":
                        break
                    await anyio.sleep(0.05)
                assert run["state"] == "dead", run
                reason = str(run["failureReason"])
                assert reason.startswith("corrupt_input: imap: settings.passwordEnv"), reason
                assert f"{_SECRET_ENV} is not granted" in reason
                assert _PASSWORD not in reason
                job = (await api.get(f"/v1/ingest/{run_id}")).json()
                assert job["attempts"] == 1, job  # permanent: not retried
            assert proc.stop() == 0, proc.log_text()
            assert _PASSWORD not in proc.log_text()
    finally:
        del os.environ[_SECRET_ENV]
    assert got == []  # nothing connected, nothing sent
