"""Benchmark: how Telha recovers from SIGKILL, figures side by side
(bench/RESULTS.md).

1. Worker SIGKILL → job running again: two remote ``tests.support.slow_worker`` processes
   (each job held for a few seconds); a job is posted, the worker that leased it is SIGKILLed,
   and the time from the kill to the job's next ``leased`` event (the other worker) is taken.
   Over a closed stream the target is ≤ 1 s (fast failover); without it the lease's expiry is
   the backstop (``jobs.lease_secs`` here, plus the reaper's period).
2. Core SIGKILL → service answering again: ``telha serve`` is SIGKILLed and started again at
   once; the time from the kill until ``GET /readyz`` answers 200.
3. The crash driver of ``tests/crash`` (a mixed load while ``telha serve`` is SIGKILLed and
   restarted and remote workers are killed too), then: lost (answered requests without a
   completed job or an applied version), duplicated (sources or ``(sourceId, contentHash)``
   with more than one version), and ``telha check`` violations.

Run: ``.venv/bin/python bench/chaos.py [--samples N] [--kills N] [--requests N]``. Exits 0
whether the targets pass or not; 1 if the load could not be run.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Drop bench/ (sys.path[0]): its queue.py would shadow the stdlib ``queue``.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import random
import re
import statistics
import subprocess
import tempfile
import time
import uuid

import anyio
import httpx

from tests.crash.driver import (
    REMOTE_WORKERS,
    Answer,
    Fleet,
    drain,
    mixed_load,
    post_with_retries,
)
from tests.support.server import ServerProcess, write_config

LEASE_S = 5.0
SLOW_S = 4.0


def _now_us() -> int:
    return time.time_ns() // 1000


def _leases(client: httpx.Client, job_id: str) -> list[tuple[int, str]]:
    events = client.get(f"/v1/ingest/{job_id}").json()["events"]
    return [(int(e["at"]), str(e["detail"])) for e in events if e["transition"] == "leased"]


def worker_failover(folder: Path, samples: int) -> list[float]:
    """Seconds from SIGKILLing the worker holding a job to the job's next lease."""
    config = write_config(
        folder,
        workers={"in_process": []},
        jobs={"lease_secs": LEASE_S, "reap_interval_s": 0.2, "backoff_base_ms": 0},
    )
    server = ServerProcess(config).start()
    key = server.create_key("chaos", "main")
    env = {"SLOW_WORKER_S": str(SLOW_S), "TELHA_HEARTBEAT_INTERVAL_SECS": "1"}
    workers: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(name: str) -> None:
        workers[name] = subprocess.Popen(
            [sys.executable, "-m", "workers_common.run", "tests.support.slow_worker",
             "--worker-id", name],
            env=server.worker_env(None, **env),
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    out: list[float] = []
    try:
        for name in ("chaos-a", "chaos-b"):
            spawn(name)
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": key}) as c:
            for i in range(samples):
                body = {"format": "code", "name": f"f{i}.py", "content": f"x = {i}\n"}
                job_id = c.post("/v1/ingest", json=body).json()["jobId"]
                while not (leases := _leases(c, job_id)):
                    time.sleep(0.02)
                holder = leases[0][1].removeprefix("worker=")
                time.sleep(0.3)  # mid-job
                killed_at = _now_us()
                workers[holder].kill()
                workers[holder].wait()
                while len(leases := _leases(c, job_id)) < 2:
                    time.sleep(0.02)
                out.append((leases[1][0] - killed_at) / 1e6)
                spawn(holder)
                while c.get(f"/v1/ingest/{job_id}").json()["state"] != "completed":
                    time.sleep(0.05)
    finally:
        for proc in workers.values():
            proc.kill()
            proc.wait()
        server.stop()
    return out


def core_restart(folder: Path, samples: int) -> list[float]:
    """Seconds from SIGKILLing ``telha serve`` to ``/readyz`` answering 200 again."""
    fleet = Fleet(folder)
    fleet.server.start()
    out = []
    try:
        for _ in range(samples):
            killed = time.monotonic()
            fleet.server.kill()
            fleet.server.proc = None
            proc = subprocess.Popen(
                [sys.executable, "-m", "telha", "serve", "--config", str(fleet.server.config)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            fleet.server.proc = proc
            while True:
                try:
                    if httpx.get(f"{fleet.base_url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.01)
            out.append(time.monotonic() - killed)
    finally:
        fleet.server.stop()
    return out


async def _crash_load(fleet: Fleet, kills: int, n: int, rng: random.Random) -> list[Answer]:
    answers: list[Answer] = []
    async with httpx.AsyncClient(
        base_url=fleet.base_url, headers={"x-api-key": fleet.key}, timeout=10
    ) as client:

        async def post_all() -> None:
            async with anyio.create_task_group() as tg:
                for req in mixed_load(rng, n):

                    async def one(req: object = req) -> None:
                        answers.append(await post_with_retries(client, req))  # type: ignore[arg-type]

                    tg.start_soon(one)
                    await anyio.sleep(rng.uniform(0.3, 1.0))

        async with anyio.create_task_group() as tg:
            tg.start_soon(post_all)
            for i in range(kills):
                await anyio.sleep(rng.uniform(0.3, 1.5))
                if i % 3 == 1:
                    await anyio.to_thread.run_sync(fleet.kill_worker, rng.choice(REMOTE_WORKERS))
                await anyio.to_thread.run_sync(fleet.kill_server)
    with anyio.move_on_after(300):
        fleet.restarts = await drain(fleet)
    return answers


def crash_figures(folder: Path, kills: int, n: int) -> tuple[int, int, int, int, int]:
    """``(answered, lost, duplicated, check violations, remote workers restarted or died)``
    after the crash load (the last: :func:`drain`'s fallback restart, or workers that exited
    on their own; both should be 0)."""
    fleet = Fleet(folder)
    fleet.start()
    fleet.key = fleet.server.create_key("chaos", "main")
    try:
        answers = anyio.run(_crash_load, fleet, kills, n, random.Random(8))
        with fleet.db() as conn:
            states = {bytes(j): s for j, s in conn.execute("SELECT job_id, state FROM jobs")}
            versions: dict[bytes, int] = {}
            for (source,) in conn.execute(
                "SELECT source_id FROM source_versions WHERE canonical_text_hash IS NOT NULL"
            ):
                versions[bytes(source)] = versions.get(bytes(source), 0) + 1
            (doubles,) = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM source_versions WHERE canonical_text_hash"
                " IS NOT NULL GROUP BY scope_id, source_id, content_hash HAVING count(*) > 1)"
            ).fetchone()
        lost = 0
        duplicated = int(doubles)
        for a in answers:
            source = uuid.UUID(a.body["sourceId"]).bytes
            job = a.body.get("jobId")
            if (job and states.get(uuid.UUID(job).bytes) != "completed") or not versions.get(
                source
            ):
                lost += 1
            duplicated += max(0, versions.get(source, 0) - 1)
        result = fleet.check()
        found = re.search(r"telha check: (\d+) violation", result.stdout)
        violations = int(found.group(1)) if found else (0 if result.returncode == 0 else -1)
    finally:
        fleet.stop()
    return len(answers), lost, duplicated, violations, fleet.restarts + len(fleet.died)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    """Run the three measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5, help="kills per recovery timing")
    parser.add_argument("--kills", type=int, default=10, help="core kills under load")
    parser.add_argument("--requests", type=int, default=30, help="requests of the load")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="telha-chaos-") as tmp:
        root = Path(tmp)
        for sub in ("worker", "core", "load"):
            (root / sub).mkdir()
        try:
            failover = worker_failover(root / "worker", args.samples)
            restart = core_restart(root / "core", args.samples)
            answered, lost, duplicated, violations, restarts = crash_figures(
                root / "load", args.kills, args.requests
            )
        except (AssertionError, RuntimeError, httpx.HTTPError) as exc:
            print(f"chaos: failed: {exc!r}", file=sys.stderr)
            return 1
    print(f"chaos: SIGKILL and recover (jobs.lease_secs = {LEASE_S:g}, reaper every 0.2 s)")
    print("| measurement | p50 | p99 | target |")
    print("|---|---|---|---|")
    print(
        f"| worker SIGKILL → job running again (n={len(failover)}) | "
        f"{statistics.median(failover):.2f} s | {_pct(failover, 0.99):.2f} s | ≤ 1 s |"
    )
    print(
        f"| core SIGKILL → service answering again (n={len(restart)}) | "
        f"{statistics.median(restart):.2f} s | {_pct(restart, 0.99):.2f} s | - |"
    )
    print(f"| lost ({answered} requests, {args.kills} core kills + workers) | {lost} | | 0 |")
    print(f"| duplicated | {duplicated} | | 0 |")
    print(f"| `telha check` violations | {violations} | | 0 |")
    print(f"| remote workers died or restarted to drain the load | {restarts} | | 0 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
