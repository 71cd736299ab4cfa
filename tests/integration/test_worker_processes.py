"""``PROCESS_POOL`` worker modules in ``telha serve`` (``[workers] processes``): the handler
runs in a pool process, not in core; its typed failures keep their kind across the pipe; a
pool process that dies fails the job ``resource_limit`` and the next job gets a fresh one;
``processes = 0`` runs the same module in core's threads; a module's
``PROCESS_POOL_MIN_BYTES`` sends shorter inputs to core's threads, longer ones to the pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ServerProcess, settled_job, write_config

pytestmark = pytest.mark.anyio

WORKER = "tests.support.process_worker"


def _server(tmp_path: Path, module: str = WORKER, **workers: Any) -> ServerProcess:
    config = write_config(
        tmp_path,
        workers={"in_process": [module], "concurrency": 1, **workers},
        jobs={"max_attempts": 2, "backoff_base_ms": 10},
    )
    return ServerProcess(config)


async def _settled(c: httpx.AsyncClient, name: str, pad: int = 0) -> dict[str, Any]:
    """POST ``name`` as a ``code`` job (its content ``pad`` bytes longer) and wait until it
    is completed or dead."""
    content = f"# {name}\n" + "#" * pad
    return await settled_job(c, {"format": "code", "name": name, "content": content})


async def _pid_of_run(c: httpx.AsyncClient, name: str, pad: int = 0) -> int:
    job = await _settled(c, name, pad)
    assert job["state"] == "completed", job
    nodes = (await c.get("/v1/nodes", params={"label": "DOCUMENT", "limit": 100})).json()
    pids = [n["properties"]["pid"] for n in nodes["nodes"] if n["properties"]["name"] == name]
    assert len(pids) == 1
    return int(pids[0])


async def test_handler_runs_in_a_pool_process_and_failures_stay_typed(tmp_path: Path) -> None:
    with _server(tmp_path) as server:
        assert server.proc is not None
        key = server.create_key("t", "o")
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            first = await _pid_of_run(c, "a.py")
            assert first != server.proc.pid

            bad = await _settled(c, "bad.py")
            assert bad["state"] == "dead"
            assert bad["failureReason"] == "corrupt_input: this input is refused"

            gen = await _settled(c, "gen.py")
            assert gen["state"] == "dead"
            assert gen["failureReason"].startswith("transient: TypeError: ")
            assert "returned a generator (PROCESS_POOL)" in gen["failureReason"]

            died = await _settled(c, "die.py")
            assert died["state"] == "dead"
            assert died["failureReason"].startswith(
                "resource_limit: the handler's worker process died"
            )
            assert [e["transition"] for e in died["events"]].count("leased") == 2

            # The pool replaced the process that died; core itself never ran the handler.
            after = await _pid_of_run(c, "b.py")
            assert after not in (server.proc.pid, 0)


async def test_processes_zero_runs_the_module_in_core_threads(tmp_path: Path) -> None:
    with _server(tmp_path, processes=0) as server:
        assert server.proc is not None
        key = server.create_key("t", "o")
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            assert await _pid_of_run(c, "a.py") == server.proc.pid


async def test_inputs_under_the_modules_floor_skip_the_pool(tmp_path: Path) -> None:
    with _server(tmp_path, "tests.support.inline_small_worker") as server:
        assert server.proc is not None
        key = server.create_key("t", "o")
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            assert await _pid_of_run(c, "small.py") == server.proc.pid  # 10 bytes < 64
            assert await _pid_of_run(c, "large.py", pad=64) not in (server.proc.pid, 0)
