"""Benchmark: re-projecting 1,000 small markdown sources vs. their first ingest.

End to end on a real ``telha serve`` (SQLite, ``[workers] in_process`` the test worker
``tests.support.projected_worker``: text_worker's markdown projection under the projection
version ``TELHA_TEST_PROJECTION_VERSION``). A round:

1. first ingest: 1,000 markdown documents (about 300 bytes each, different bytes and names)
   POSTed ``--clients`` at a time; the rate is sources per second from the first POST until
   every job has completed;
2. the server stops and starts again with the projection version one higher (the worker was
   improved): ``POST /v1/reproject`` lists the 1,000 current versions as outdated and
   enqueues one job each from the payload's stored bytes; the rate is sources per second from
   that POST until every job has completed (the POST itself included).

The ratio re-projection / first ingest must be at least 0.8. ``--rounds`` rounds on fresh
data folders; medians reported. Run: ``.venv/bin/python bench/reproject.py [--rounds N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds queue.py: the repo root instead, so ``import queue`` is the stdlib's.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import os
import statistics
import tempfile
import time
import uuid

import anyio
import httpx

from tests.support.server import ServerProcess, write_config

SOURCES = 1_000
CLIENTS = 16
ROUNDS = 3
TARGET = 0.8
VERSION_ENV = "TELHA_TEST_PROJECTION_VERSION"
_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "omega"]


def _doc(i: int) -> str:
    words = " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(30))
    return f"# Note {i}\n\n{words}.\n\n## Part\n\nParagraph {i} of the bench: {words}.\n"


async def _wait_all(client: httpx.AsyncClient, job_ids: list[str]) -> None:
    """Until every job is terminal, one at a time in enqueue order (jobs finish about in
    that order, so most are done when asked: one request each); raises if one did not
    complete."""
    for job_id in job_ids:
        while True:
            state = (await client.get(f"/v1/ingest/{job_id}")).json()["state"]
            if state == "completed":
                break
            if state not in ("pending", "leased"):
                raise RuntimeError(f"job {job_id} ended {state}")
            await anyio.sleep(0.05)


async def _first_ingest(client: httpx.AsyncClient, clients: int) -> float:
    job_ids: list[str] = []
    limit = anyio.Semaphore(clients)

    async def one(i: int) -> None:
        async with limit:
            body = {"format": "markdown", "name": f"notes/{i:05}.md", "content": _doc(i)}
            resp = await client.post("/v1/ingest", json=body)
            if resp.status_code != 202:
                raise RuntimeError(resp.text)
            job_ids.append(resp.json()["jobId"])

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(SOURCES):
            tg.start_soon(one, i)
    await _wait_all(client, job_ids)
    return SOURCES / (time.perf_counter() - t0)


async def _reproject(client: httpx.AsyncClient) -> float:
    t0 = time.perf_counter()
    resp = await client.post("/v1/reproject", json={})
    if resp.status_code != 202:
        raise RuntimeError(resp.text)
    body = resp.json()
    if len(body["outdated"]) != SOURCES or body["rawGone"]:
        raise RuntimeError(f"expected {SOURCES} outdated: {len(body['outdated'])}")
    await _wait_all(client, [o["jobId"] for o in body["outdated"]])
    return SOURCES / (time.perf_counter() - t0)


def _round(clients: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="telha-reproject-") as folder:
        config = write_config(
            Path(folder), workers={"in_process": ["tests.support.projected_worker"]}
        )
        os.environ[VERSION_ENV] = "1"
        srv = ServerProcess(config)
        with srv:
            key = srv.create_key(f"bench-{uuid.uuid4()}", "org")
            headers = {"x-api-key": key}

            async def first() -> float:
                async with httpx.AsyncClient(
                    base_url=srv.base_url, headers=headers, timeout=120
                ) as c:
                    return await _first_ingest(c, clients)

            ingest_rate = anyio.run(first)
            srv.stop()
        os.environ[VERSION_ENV] = "2"
        with srv:

            async def again() -> float:
                async with httpx.AsyncClient(
                    base_url=srv.base_url, headers=headers, timeout=120
                ) as c:
                    return await _reproject(c)

            reproject_rate = anyio.run(again)
            srv.stop()
        os.sync()
    return ingest_rate, reproject_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    args = parser.parse_args()
    rows = []
    print("round  first ingest (src/s)  reproject (src/s)  ratio")
    for r in range(args.rounds):
        ingest_rate, reproject_rate = _round(args.clients)
        rows.append((ingest_rate, reproject_rate))
        print(f"{r + 1:>5}  {ingest_rate:>20.0f}  {reproject_rate:>17.0f}  "
              f"{reproject_rate / ingest_rate:>5.2f}")  # fmt: skip
    ingest = statistics.median(r[0] for r in rows)
    again = statistics.median(r[1] for r in rows)
    ratio = statistics.median(r[1] / r[0] for r in rows)
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"median {ingest:>20.0f}  {again:>17.0f}  {ratio:>5.2f}  (target >= {TARGET}: {verdict})")


if __name__ == "__main__":
    main()
