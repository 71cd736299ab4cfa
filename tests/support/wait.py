"""The one way tests wait for a job: poll ``GET /v1/ingest/{jobId}`` until the job reaches one
of the states asked for, within a bounded time.

Waiting for a terminal state goes through the product's own client
(:meth:`telha.client.AsyncTelha.wait`, which also returns at once when the job ends in the
other terminal state, so a test waiting for ``completed`` fails fast on ``dead``); waiting for
``pending`` or ``leased`` polls the same endpoint. Both return the raw status body as the REST
API sends it. :func:`wait_job_blocking` is the same wait for synchronous tests.
:func:`until` polls any async condition of the store (what no event announces).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx

from telha.client import AsyncTelha
from telha.domain.model import TERMINAL_JOB_STATES

__all__ = ["TERMINAL", "until", "wait_job", "wait_job_blocking", "wait_search_indexed"]

#: States a job never leaves (the server's own set).
TERMINAL = TERMINAL_JOB_STATES
#: Seconds between two polls for a non-terminal state.
_POLL_S = 0.05


async def wait_job(
    client: httpx.AsyncClient, job_id: object, *states: str, within_s: float = 60.0
) -> dict[str, Any]:
    """The status body of job ``job_id`` once its state is one of ``states`` (default: either
    terminal state: completed, dead or cancelled), read with ``client`` (its base URL and
    ``x-api-key``).

    :raises TimeoutError: the job did not get there within ``within_s`` seconds; the message
        says where it was.
    """
    wanted = states or TERMINAL
    url = f"/v1/ingest/{job_id}"
    if set(wanted) <= set(TERMINAL):
        async with AsyncTelha(str(client.base_url), client.headers["x-api-key"]) as telha:
            await telha.wait(str(job_id), timeout=within_s, poll_s=0.02, max_poll_s=0.25)
    job: dict[str, Any] = {}
    with anyio.move_on_after(within_s):
        while True:
            resp = await client.get(url)
            assert resp.status_code == 200, resp.text
            job = dict(resp.json())
            if job["state"] in wanted or job["state"] in TERMINAL:
                return job
            await anyio.sleep(_POLL_S)
    raise TimeoutError(f"job {job_id} still {job.get('state')} after {within_s} s, not {wanted}")


def wait_job_blocking(
    client: httpx.Client, job_id: object, *states: str, within_s: float = 60.0
) -> dict[str, Any]:
    """:func:`wait_job` for synchronous tests (``client`` is an ``httpx.Client``): runs it on
    its own event loop in a worker thread, so it also works when called from a thread that
    has one."""

    async def run() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=client.base_url, headers=client.headers) as c:
            return await wait_job(c, job_id, *states, within_s=within_s)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, run).result()


def wait_search_indexed(c: httpx.Client, *, within_s: float = 600.0) -> float:
    """Seconds until the search indexer has written every queued version: ``/metrics``'
    ``telha_search_queued_versions`` reads 0 (it is as of the indexer's last look, every
    0.25 s when idle, so the first look waits 0.5 s). Raises ``TimeoutError`` after
    ``within_s``."""
    start = time.perf_counter()
    time.sleep(0.5)
    while time.perf_counter() - start < within_s:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith("telha_search_queued_versions") and float(line.split()[-1]) == 0:
                return time.perf_counter() - start
        time.sleep(0.1)
    raise TimeoutError(f"the search index's queue did not drain within {within_s} s")


async def until(
    condition: Callable[[], Awaitable[bool]], *, within_s: float = 30.0, every_s: float = 0.05
) -> None:
    """Await ``condition()`` every ``every_s`` seconds until it is true.

    :raises TimeoutError: still false after ``within_s`` seconds.
    """
    with anyio.fail_after(within_s):
        while not await condition():  # noqa: ASYNC110 (nothing announces it: polled)
            await anyio.sleep(every_s)
