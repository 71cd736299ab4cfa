"""A remote worker (``python -m workers_common.run``) across core SIGKILLs:
it never dies or hangs when core dies under it, whether its ``PollJobs`` stream was idle,
holding a job or just opening, and it takes the restarted core's jobs."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess, restart_port, write_config

#: Seconds a posted job may take to complete on a loaded 2-core machine (a bound, not a speed).
DONE_WITHIN_S = 60.0
ROUNDS = 4


class Core:
    """``telha serve`` on fixed loopback ports (so the worker finds it again after a restart)
    and one remote ``text_worker`` whose log is kept."""

    def __init__(self, folder: Path) -> None:
        rest = restart_port()
        grpc = restart_port(rest)
        config = write_config(
            folder,
            server={"rest_addr": f"127.0.0.1:{rest}", "grpc_addr": f"127.0.0.1:{grpc}"},
            jobs={"lease_secs": 30, "backoff_base_ms": 50, "backoff_max_s": 0.5},
            workers={"in_process": []},
        )
        self.server = ServerProcess(config).start()
        self.key = self.server.create_key("acme", "main")
        self.worker_log = folder / "worker.log"
        with self.worker_log.open("wb") as log:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "workers_common.run", "text_worker"],
                env=self.server.worker_env(None, TELHA_HEARTBEAT_INTERVAL_SECS="0.5"),
                stderr=log,
            )
        self.posted = 0

    def log(self) -> str:
        return self.worker_log.read_text(encoding="utf-8", errors="replace")

    def polls(self) -> int:
        """How often the worker opened a ``PollJobs`` stream (its ``polling`` log lines)."""
        return self.log().count('"polling ')

    def assert_worker_alive(self) -> None:
        assert self.worker.poll() is None, f"worker exited {self.worker.returncode}:\n{self.log()}"
        assert "Traceback" not in self.log(), self.log()

    def job_done(self) -> None:
        """Post a text job and wait until it is completed (the worker took it)."""
        self.posted += 1
        body = {"format": "text", "name": f"n{self.posted}.txt", "content": f"n {self.posted}"}
        with httpx.Client(base_url=self.server.base_url, headers={"x-api-key": self.key}) as c:
            job = c.post("/v1/ingest", json=body).json()["jobId"]
            deadline = time.monotonic() + DONE_WITHIN_S
            while c.get(f"/v1/ingest/{job}").json()["state"] != "completed":
                self.assert_worker_alive()
                assert time.monotonic() < deadline, f"job {job} not taken:\n{self.log()}"
                time.sleep(0.05)

    def kill_and_restart(self) -> None:
        self.server.kill()
        self.server.start()

    def stop(self) -> None:
        self.worker.kill()
        self.worker.wait()
        self.server.kill()


@pytest.fixture
def core(tmp_path: Path) -> Iterator[Core]:
    running = Core(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_worker_outlives_core_kills_on_an_idle_stream(core: Core) -> None:
    """The idle poll stream's task is woken by grpclib's ``Task.cancel()`` when the
    connection drops: that must end in a reconnect, not a ``CancelledError`` escaping the
    worker (it did: the process died after a core SIGKILL)."""
    core.job_done()
    for _ in range(ROUNDS):
        core.kill_and_restart()
        core.job_done()
    core.assert_worker_alive()


def test_worker_outlives_core_killed_as_its_stream_opens(core: Core) -> None:
    """Core is SIGKILLed right as the worker's new ``PollJobs`` stream opens (the moment its
    ``polling`` line appears), again and again; the worker then takes the restarted core's
    jobs."""
    core.job_done()
    for _ in range(ROUNDS):
        opened = core.polls()
        core.kill_and_restart()
        deadline = time.monotonic() + DONE_WITHIN_S
        while core.polls() == opened:  # the worker reconnecting: its log is the only signal
            core.assert_worker_alive()
            assert time.monotonic() < deadline, core.log()
            time.sleep(0.005)
        core.kill_and_restart()
        core.job_done()
    core.assert_worker_alive()


def _delays(log: str) -> list[str]:
    """The ``retrying in N s`` delays the worker logged, in order."""
    return [
        line.split("retrying in ")[1].split("s")[0]
        for line in log.splitlines()
        if "retrying in" in line
    ]


def test_reconnect_backoff_starts_over_after_a_healthy_stream(core: Core) -> None:
    """While core stays down the worker's delay doubles; once a stream served a job, the
    next loss is retried after the first delay again, not the last one (it kept growing to
    30 s across core kills)."""
    core.job_done()
    core.server.kill()
    deadline = time.monotonic() + DONE_WITHIN_S
    while "4.0" not in _delays(core.log()):  # 0.5, 1, 2, 4: core down for ~4 s
        assert time.monotonic() < deadline, core.log()
        time.sleep(0.05)
    core.server.start()
    core.job_done()  # a healthy stream: it delivered a job
    seen = len(_delays(core.log()))
    core.kill_and_restart()
    deadline = time.monotonic() + DONE_WITHIN_S
    while len(_delays(core.log())) == seen:
        assert time.monotonic() < deadline, core.log()
        time.sleep(0.05)
    assert _delays(core.log())[seen] == "0.5", core.log()
    core.job_done()
    core.assert_worker_alive()
