"""Where folder and slack-export connectors may read (docs/connectors.md, "Allowed
roots"): ``[connectors] allowed_roots`` refuses a path outside it when a connector is added
(400 naming the setting) and, authoritatively, in the connector worker at every run (the run
dies ``corrupt_input``, nothing retired); slack-export limits may only lower the defaults."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from telha.domain.model import Scope
from tests.support.inproc import InProcessServer
from tests.support.server import write_config
from tests.support.sync_runs import run_sync

pytestmark = pytest.mark.anyio

_JOBS = {"max_attempts": 2, "backoff_base_ms": 50, "backoff_max_s": 1}


@pytest.fixture
def allowed() -> Iterator[Path]:
    """An allowed root any user can read (a worker may run as ``nobody``)."""
    path = Path(tempfile.mkdtemp(prefix="telha-roots-"))
    path.chmod(0o755)
    yield path
    for p in sorted(path.rglob("*"), reverse=True):
        p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
    path.rmdir()


@pytest.fixture
def server(engine: str, tmp_path: Path, allowed: Path) -> Iterator[InProcessServer]:
    """A server allowing ``allowed`` only, with no connector worker (the test starts one)."""
    config = write_config(
        tmp_path, engine, workers={"in_process": ["text_worker"]}, jobs=_JOBS,
        connectors={"allowed_roots": [str(allowed)]},
    )  # fmt: skip
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


async def _post(
    srv: InProcessServer, key: str, kind: str, settings: dict[str, Any]
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=srv.base_url, headers={"x-api-key": key}) as c:
        return await c.post("/v1/connectors", json={"kind": kind, "settings": settings})


async def test_add_refuses_paths_outside_allowed_roots(
    server: InProcessServer, allowed: Path, tmp_path: Path
) -> None:
    key = server.create_key(f"tenant-{uuid.uuid4()}", "org")
    (allowed / "sub").mkdir()
    (allowed / "escape").symlink_to("/etc")
    outside = [
        ("folder", "root", "/etc"),
        ("folder", "root", "/"),
        ("folder", "root", str(allowed / "escape")),  # a link inside pointing outside
        ("folder", "root", f"{allowed}/sub/../../"),  # .. out of the root
        ("folder", "root", f"{allowed}-sibling"),  # a shared prefix is not inside
        ("slack-export", "path", str(tmp_path / "export.zip")),
        ("slack-export", "path", f"{allowed}/../export.zip"),
    ]
    for kind, field, path in outside:
        resp = await _post(server, key, kind, {field: path})
        assert resp.status_code == 400, (path, resp.text)
        error = resp.json()["error"]
        assert error["code"] == "INVALID_REQUEST"
        assert f"settings.{field}" in error["message"], error
        assert "[connectors] allowed_roots" in error["message"], error
    for kind, field, path in (
        ("folder", "root", str(allowed)),
        ("folder", "root", str(allowed / "sub")),
        ("slack-export", "path", str(allowed / "sub" / "export.zip")),
    ):
        resp = await _post(server, key, kind, {field: path})
        assert resp.status_code == 201, (path, resp.text)


async def test_slack_limits_may_only_lower_the_defaults(
    server: InProcessServer, allowed: Path
) -> None:
    key = server.create_key(f"tenant-{uuid.uuid4()}", "org")
    path = str(allowed / "export.zip")
    for field, ceiling in (("maxEntryBytes", 256 << 20), ("maxTotalBytes", 16 << 30)):
        resp = await _post(server, key, "slack-export", {"path": path, field: ceiling + 1})
        assert resp.status_code == 400, resp.text
        assert f"settings.{field}" in resp.json()["error"]["message"]
        resp = await _post(server, key, "slack-export", {"path": path, field: ceiling})
        assert resp.status_code == 201, resp.text


async def test_empty_allowed_roots_refuses_every_path(engine: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, engine, workers={"in_process": []})
    with InProcessServer(config) as srv:
        key = srv.create_key(f"tenant-{uuid.uuid4()}", "org")
        resp = await _post(srv, key, "folder", {"root": str(tmp_path)})
        assert resp.status_code == 400, resp.text
        assert "allowed_roots is empty" in resp.json()["error"]["message"]
        assert srv.stop() == 0, srv.log_text()


def _worker(srv: InProcessServer, scope: Scope, roots: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "workers_common.run", "connectors"],
        env=srv.worker_env(scope, TELHA_CONNECTORS__ALLOWED_ROOTS=json.dumps(roots)),
        stderr=subprocess.DEVNULL,
    )


async def test_worker_refuses_a_run_outside_its_roots(
    server: InProcessServer, allowed: Path, tmp_path: Path
) -> None:
    """The worker's own roots decide at run time: a connector added while its root was
    allowed, run by a worker that does not allow it, dies ``corrupt_input``; the items its
    earlier run ingested stay current."""
    scope = Scope(f"tenant-{uuid.uuid4()}", "org")
    key = server.create_key(scope.tenant_id, scope.organization_id)
    tree = allowed / "tree"
    tree.mkdir(mode=0o755)
    for i in range(3):
        (tree / f"{i}.txt").write_text(f"file {i}\n", encoding="utf-8")
        (tree / f"{i}.txt").chmod(0o644)
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=30
    ) as api:
        made = await api.post(
            "/v1/connectors", json={"kind": "folder", "settings": {"root": str(tree)}}
        )
        assert made.status_code == 201, made.text
        cid = made.json()["connectorId"]
        for roots, expect in (([str(allowed)], "completed"), ([str(tmp_path / "other")], "dead")):
            worker = _worker(server, scope, roots)
            try:
                run = await run_sync(api, cid)
            finally:
                worker.terminate()
                worker.wait(timeout=30)
            assert run["state"] == expect, run
        assert "corrupt_input" in run["failureReason"], run
        assert "allowed_roots" in run["failureReason"], run
        assert not run["retired"], run  # the run listed nothing, retired nothing
        item = await api.get("/v1/sources", params={"connector": cid, "externalId": "0.txt"})
        assert item.json()["state"] == "current", item.text
