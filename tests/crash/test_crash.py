"""The crash suite (docs/testing.md): a mixed load is posted while ``telha serve`` is SIGKILLed
and restarted 20 times at seeded random points, and remote workers are SIGKILLed and
restarted too. Once the load drains: every request answered 200/201/202 ended in a terminal
job state or an applied version (and none is ``dead``: nothing was lost); every job of a
request that asked for a webhook was delivered to the test's receiver at least once, signed
with the scope's secret, and no other job was (webhook deliveries are durable); no (sourceId,
contentHash) has two versions, job counts match the requests, and ``telha check`` passes —
among its checks ``current_versions``: no source has rows of two versions current at once
(supersedes and retires under kills: ``test_versions_crash``).

SQLite runs at its default ``synchronous = "normal"``: in WAL mode a commit is in the WAL
file (the OS's page cache) before it returns, so killing the process loses nothing that was
answered; only an OS crash or power cut can, which ``"full"`` covers.

``TELHA_CRASH_SEED`` picks another seed (printed on failure).
"""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path

import anyio
import httpx
import pytest

from tests.crash.driver import (
    REMOTE_WORKERS,
    Answer,
    Fleet,
    dead_workers,
    drain,
    mixed_load,
    post_with_retries,
)
from tests.support.receiver import Receiver

pytestmark = [pytest.mark.crash, pytest.mark.anyio]

SEED = int(os.environ.get("TELHA_CRASH_SEED", "20260801"))
SERVE_KILLS = 20
REQUESTS = 50
IN_FLIGHT = 4


async def _post_all(
    fleet: Fleet, rng: random.Random, answers: list[Answer], webhook_url: str
) -> None:
    limit = anyio.Semaphore(IN_FLIGHT)
    async with httpx.AsyncClient(
        base_url=fleet.base_url, headers={"x-api-key": fleet.key}, timeout=10
    ) as client:

        async def one(req: object) -> None:
            try:
                answers.append(await post_with_retries(client, req))  # type: ignore[arg-type]
            finally:
                limit.release()

        async with anyio.create_task_group() as tg:
            for req in mixed_load(rng, REQUESTS, webhook_url):
                await limit.acquire()
                tg.start_soon(one, req)
                await anyio.sleep(rng.uniform(0.4, 1.4))


async def _chaos(fleet: Fleet, rng: random.Random) -> None:
    for i in range(SERVE_KILLS):
        await anyio.sleep(rng.uniform(0.2, 1.5))
        if i % 3 == 1:
            await anyio.to_thread.run_sync(fleet.kill_worker, rng.choice(REMOTE_WORKERS))
            await anyio.sleep(rng.uniform(0.1, 0.8))
        await anyio.to_thread.run_sync(fleet.kill_server)


async def test_nothing_lost_duplicated_or_half_written(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    receiver = Receiver()  # bound now: the server's [webhooks] allowed_hosts lists its port
    fleet = Fleet(tmp_path, webhook_hosts=(f"127.0.0.1:{receiver.port}",))
    await anyio.to_thread.run_sync(fleet.start)
    fleet.key = fleet.server.create_key("crash", "main")
    secret = await anyio.to_thread.run_sync(fleet.webhook_secret, "crash", "main")
    answers: list[Answer] = []
    receiver.__enter__()  # the receiver outlives every server kill
    try:
        with anyio.fail_after(270):
            async with anyio.create_task_group() as tg:
                load_rng = random.Random(rng.random())
                tg.start_soon(_post_all, fleet, load_rng, answers, receiver.url())
                await _chaos(fleet, random.Random(rng.random()))
            dead = dead_workers(fleet)
            restarts = await drain(fleet)
        _assert_invariants(fleet, answers)
        await _assert_delivered(receiver, secret, answers)
        result = fleet.check()
        assert result.returncode == 0, f"seed {SEED}\n{result.stdout}{result.stderr}"
        assert "current_versions" in result.stdout, result.stdout  # one version current
        # Remote workers outlive every core kill and take the restarted core's jobs.
        assert not dead + fleet.died, "\n".join(dead + fleet.died)
        assert restarts == 0, "the load drained only after the remote workers were restarted"
    except BaseException:
        print(f"crash suite seed {SEED}, kills {fleet.kills}, folder {tmp_path}")
        raise
    finally:
        await anyio.to_thread.run_sync(fleet.stop)
        receiver.__exit__(None, None, None)
    retried = sum(1 for a in answers if a.retries)
    print(f"kills {fleet.kills}; {len(answers)} requests, {retried} retried;", end=" ")
    print(f"remote workers restarted: {restarts}")


async def _assert_delivered(receiver: Receiver, secret: str, answers: list[Answer]) -> None:
    """Every job of a webhook-enabled request was delivered (each delivery verifies under
    the scope's secret), within 60 s of the drain; no other job was."""
    wanted = {
        a.body["jobId"] for a in answers if a.body.get("jobId") and "options" in a.request.body
        and "webhook" in a.request.body["options"]
    }  # fmt: skip
    assert wanted, "the load asked for no webhook"
    await receiver.wait_jobs(wanted, timeout_s=60)
    delivered = set()
    for d in receiver.deliveries():
        body = Receiver.verified(d, secret)
        assert body["state"] in ("completed", "dead"), body
        delivered.add(body["jobId"])
    assert delivered == wanted, delivered ^ wanted


def _assert_invariants(fleet: Fleet, answers: list[Answer]) -> None:
    assert len(answers) == REQUESTS
    with fleet.db() as conn:
        versions = {
            (bytes(s), int(tx)): bytes(h)
            for s, tx, h in conn.execute(
                "SELECT source_id, tx, content_hash FROM source_versions"
                " WHERE canonical_text_hash IS NOT NULL"
            )
        }
        states = {bytes(j): s for j, s in conn.execute("SELECT job_id, state FROM jobs")}
        roots = conn.execute(
            "SELECT count(*) FROM job_events WHERE seq = 1 AND detail IS NULL"
        ).fetchone()[0]
        doubles = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM source_versions WHERE canonical_text_hash"
            " IS NOT NULL GROUP BY scope_id, source_id, content_hash HAVING count(*) > 1)"
        ).fetchone()[0]
    per_source: dict[bytes, int] = {}
    for source, _ in versions:
        per_source[source] = per_source.get(source, 0) + 1
    for a in answers:
        source = uuid.UUID(a.body["sourceId"]).bytes
        if a.status == 201:
            assert (source, a.body["sourceVersionTx"]) in versions, a
        job_id = a.body.get("jobId")
        if job_id:
            state = states.get(uuid.UUID(job_id).bytes)
            assert state in ("completed", "dead"), (a, state)
            assert state == "completed", f"lost: {a.request.name} ended {state}"
        # One request, one source, one version: a retried POST made nothing twice.
        assert per_source.get(source) == 1, (a.request.name, per_source.get(source))
    assert doubles == 0, "a (sourceId, contentHash) has two versions"
    worker_requests = sum(1 for a in answers if a.request.fmt != "json")
    assert roots == worker_requests, (roots, worker_requests)
    assert "dead" not in states.values(), [j for j, s in states.items() if s == "dead"]
