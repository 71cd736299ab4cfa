"""SAQ on Redis beside Telha's queue (``bench/queue.py --peer saq``): the same number of tiny
jobs, enqueued as fast as possible with bounded concurrency, worked by one SAQ worker process
with a no-op handler; jobs/s from the first enqueue to the last completion, and each job's
``queued → completed`` latency.

Two halves, so SAQ is never a dependency of Telha or of its venv:

- imported by ``bench/queue.py`` (stdlib only): :func:`saq_python` makes the bench's own
  venv (``bench/.venv-saq``, ``saq[redis]`` from PyPI, pinned) on first use, and :func:`run`
  starts Debian's ``redis-server`` on a free 127.0.0.1 port with no persistence, the worker
  and the driver, and stops them;
- run by that venv's Python: ``saq_peer.py worker URL CONCURRENCY`` (the worker) and
  ``saq_peer.py drive URL JOBS`` (enqueue, wait, print the figures as one JSON line).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # bench/ holds queue.py: drop it so ``import queue`` is the stdlib's
    sys.path.pop(0)

import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

#: What the bench installs in its own venv (not Telha's): the SAQ release, and
#: ``typing_extensions``, which it imports without declaring it.
SAQ = ("saq[redis]==0.26.4", "typing_extensions")
VENV = Path(__file__).resolve().parent / ".venv-saq"
QUEUE = "bench"
IN_FLIGHT = 32  # concurrent enqueues, as bench/queue.py's concurrent POSTs
CONCURRENCY = 10  # SAQ's default worker concurrency


def saq_python(python: Path | None = None) -> Path:
    """The Python of a venv with SAQ: ``python`` if given, else ``bench/.venv-saq``'s, made
    (``python -m venv``, then ``pip install saq[redis]``) when absent.

    :raises RuntimeError: no ``redis-server`` on ``PATH`` (Debian: ``apt-get install
        redis-server``), or the venv could not be made.
    """
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    if python is not None:
        return python
    exe = VENV / "bin" / "python"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(exe), "-m", "pip", "install", "-q", *SAQ], check=True)
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run(python: Path, jobs: int, concurrency: int = CONCURRENCY) -> tuple[float, float, float]:
    """Redis on a free 127.0.0.1 port, one SAQ worker process, ``jobs`` no-op jobs;
    ``(jobs/s, p50 ms, p99 ms)``. Everything started is stopped."""
    port = _free_port()
    url = f"redis://127.0.0.1:{port}"
    me = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory(prefix="saq-peer-") as tmp:
        redis = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        worker = None
        try:
            _wait_port(port)
            worker = subprocess.Popen([str(python), me, "worker", url, str(concurrency)])
            done = subprocess.run(
                [str(python), me, "drive", url, str(jobs)],
                capture_output=True, text=True, check=False, timeout=600,
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"SAQ driver exited {done.returncode}: {done.stderr[-2000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            return float(got["rate"]), float(got["p50"]), float(got["p99"])
        finally:
            for proc in (worker, redis):
                if proc is not None:
                    proc.terminate()
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()


# The SAQ side: run by the venv's Python only.


async def noop(ctx: Any, **kwargs: Any) -> None:
    """The no-op handler."""


def _worker(url: str, concurrency: int) -> None:
    import asyncio

    from saq import Queue, Worker

    async def main() -> None:
        queue = Queue.from_url(url, name=QUEUE)
        worker = Worker(queue, functions=[noop], concurrency=concurrency)
        await worker.start()

    asyncio.run(main())


def _drive(url: str, jobs: int) -> None:
    import asyncio

    from saq import Queue

    async def main() -> None:
        queue = Queue.from_url(url, name=QUEUE)
        await queue.connect()
        limit = asyncio.Semaphore(IN_FLIGHT)

        async def one(key: str) -> Any:
            async with limit:
                return await queue.enqueue("noop", key=key)

        warm = await asyncio.gather(*(one(f"warm-{i}") for i in range(32)))
        await _wait(queue, warm)
        t0 = time.time()
        enqueued = await asyncio.gather(*(one(f"job-{i}") for i in range(jobs)))
        finished = await _wait(queue, enqueued)
        last = max(j.completed for j in finished) / 1000
        lat = sorted((j.completed - j.queued) for j in finished)
        print(json.dumps({"rate": jobs / (last - t0), "p50": lat[len(lat) // 2],
                          "p99": lat[int(len(lat) * 0.99)]}))  # fmt: skip
        await queue.disconnect()

    asyncio.run(main())


async def _wait(queue: Any, jobs: list[Any]) -> list[Any]:
    """Poll until every job of ``jobs`` is complete; their final states."""
    import asyncio

    from saq.job import Status

    pending = list(jobs)
    done: list[Any] = []
    while pending:
        await asyncio.sleep(0.2)
        tail = pending[-1]
        await tail.refresh()
        if tail.status != Status.COMPLETE:
            continue
        still = []
        for job in pending:
            await job.refresh()
            if job.status == Status.COMPLETE:
                done.append(job)
            elif job.status in (Status.FAILED, Status.ABORTED):
                raise RuntimeError(f"SAQ job {job.key} ended {job.status}")
            else:
                still.append(job)
        pending = still
    return done


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        _worker(sys.argv[2], int(sys.argv[3]))
    else:
        _drive(sys.argv[2], int(sys.argv[3]))
