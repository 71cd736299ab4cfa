"""``AsyncTelha.cancel()`` and ``telha cancel JOB…`` against a real ``telha serve`` (no
in-process workers: jobs stay pending unless the scripted worker takes them), both engines."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import anyio
import pytest

from telha.client import AsyncTelha, JobFinished, NotFound
from tests.support.inproc import InProcessServer
from tests.support.queue_env import Tenant, queue_server, text_submission
from tests.support.server import child_environ
from tests.support.worker import ScriptedWorker

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def queue_srv(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[InProcessServer]:
    with queue_server(
        tmp_path_factory, f"cancel-client-{engine}", 300.0, engine, in_process=True
    ) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _telha(server: InProcessServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": server.base_url}
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )  # fmt: skip


async def test_client_cancel(tenant: Tenant, worker: ScriptedWorker) -> None:
    pending = await tenant.post("code", "c1.py", "a = 1")
    key = tenant.client.headers["x-api-key"]
    async with AsyncTelha(tenant.server.base_url, key) as telha:
        job = await telha.cancel(str(pending["jobId"]))
        assert job.state == "cancelled" and job.events[-1].transition == "cancelled"
        assert await telha.cancel(str(pending["jobId"]), children=True) == job
        assert await telha.wait(str(pending["jobId"]), timeout=5) == job  # terminal
        await tenant.post("code", "c2.py", "b = 2")
        held = await worker.next_job(["code"])
        assert (await worker.submit(held, text_submission("b = 2"))).accepted
        with pytest.raises(JobFinished) as err:
            await telha.cancel(held.job_id)
        assert err.value.status == 409 and err.value.code == "JOB_FINISHED"
        with pytest.raises(NotFound):
            await telha.cancel(str(uuid.uuid4()))


async def test_cli_cancel_several_jobs(tenant: Tenant) -> None:
    a = await tenant.post("code", "cli-a.py", "a = 1")
    b = await tenant.post("code", "cli-b.py", "b = 1")
    unknown = str(uuid.uuid4())
    key = tenant.client.headers["x-api-key"]
    out = await anyio.to_thread.run_sync(
        lambda: _telha(tenant.server, key, "cancel", str(a["jobId"]), unknown, str(b["jobId"]))
    )
    assert out.returncode == 1
    assert out.stdout.splitlines() == [f"{a['jobId']}  cancelled", f"{b['jobId']}  cancelled"]
    assert out.stderr.startswith(f"telha: {unknown}: NOT_FOUND: ")
    for posted in (a, b):
        assert (await tenant.job(posted["jobId"]))["state"] == "cancelled"
    again = await anyio.to_thread.run_sync(
        lambda: _telha(tenant.server, key, "cancel", "--children", str(a["jobId"]))
    )
    assert again.returncode == 0 and again.stdout == f"{a['jobId']}  cancelled\n"
    usage = await anyio.to_thread.run_sync(lambda: _telha(tenant.server, key, "cancel"))
    assert usage.returncode == 2 and "JOB" in usage.stderr
