"""A handler raising ``SystemExit`` or ``KeyboardInterrupt`` inside ``telha serve``: thread
and ``async def`` handlers alike, the job fails typed (``transient``, naming the exception)
and the service goes on serving; it used to stop the whole process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ServerProcess, settled_job, write_config

pytestmark = pytest.mark.anyio

MODULES = ["tests.support.exiting_worker", "tests.support.exiting_async_worker"]


async def _settled(c: httpx.AsyncClient, fmt: str, name: str) -> dict[str, Any]:
    return await settled_job(c, {"format": fmt, "name": name, "content": f"# {name}\n"})


async def test_systemexit_and_keyboardinterrupt_in_handlers_fail_only_their_job(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path,
        workers={"in_process": MODULES, "concurrency": 1, "processes": 0},
        jobs={"max_attempts": 1},
    )
    with ServerProcess(config) as server:
        key = server.create_key("acme", "main")
        async with httpx.AsyncClient(base_url=server.base_url, headers={"x-api-key": key}) as c:
            for fmt, ext in (("code", "py"), ("markdown", "md")):
                for what, shown in (("exit", "SystemExit: 3"), ("interrupt", "KeyboardInterrupt")):
                    job = await _settled(c, fmt, f"{what}.{ext}")
                    assert job["state"] == "dead", job
                    assert job["failureReason"].startswith(f"transient: {shown}"), job
                    assert server.proc is not None and server.proc.poll() is None
                # The same consumer takes the next job: nothing died with the handler.
                assert (await _settled(c, fmt, f"fine.{ext}"))["state"] == "completed"
            assert (await c.get("/readyz")).status_code == 200
        assert "in_process_worker_died" not in server.log_text()
        assert server.stop() == 0
