"""Benchmark: an incremental folder sync against its floor (bench/RESULTS.md;
docs/connectors.md).

A folder of ``--files`` small text files (default 10,000) is synced once by a ``folder``
connector (the connector worker and the text worker in-process). Then 1% of the files are
changed and 1% deleted, and a second run is timed until it and its item jobs ended. The
floor, in the same run on the same machine: the listing alone (a walk with one ``lstat`` per
file, what any sync must do) plus ingesting just the changed files by ``POST /v1/ingest``
into a fresh scope, until their jobs ended. Target: second run ≤ 1.3× the floor, with
``unchanged`` = every other file (their bytes are not read: the marker decides;
tests/integration/test_folder_sync.py proves no read). The run's report goes in pages, so
its item jobs start while the listing goes on; the retires' own time is read from the
run's ``completed`` event. The load average is printed beside the figures.

Run: ``.venv/bin/python bench/sync.py [--files N] [--engine sqlite|postgres]``. Exits 0
whether the target passes or not; 1 if the load could not be run.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Drop bench/ (sys.path[0]): its queue.py would shadow the stdlib ``queue``.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import os
import tempfile
import time
import uuid
from typing import Any

import httpx

from tests.support.server import ServerProcess, write_config

#: Both sides poll for their end at the same period.
_POLL_S = 0.02


def _write_tree(root: Path, n: int) -> list[Path]:
    files = []
    for i in range(n):
        d = root / f"d{i // 500:03d}"
        d.mkdir(exist_ok=True)
        p = d / f"note{i:05d}.txt"
        p.write_text(f"note {i}\n\nsome words for note {i}, quite small.\n", encoding="utf-8")
        files.append(p)
    return files


def _run(c: httpx.Client, cid: str) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    started = c.post(f"/v1/connectors/{cid}/runs", json={"confirmPrune": False})
    started.raise_for_status()
    run_id = started.json()["runId"]
    while True:
        # limit=1: the run just started is the newest (older runs are not recounted).
        runs = c.get(f"/v1/connectors/{cid}/runs", params={"limit": 1}).json()["runs"]
        run = next(r for r in runs if r["runId"] == run_id)
        if run["state"] in ("completed", "dead") and not {"pending", "leased"} & set(
            run["children"]
        ):
            return time.perf_counter() - t0, run
        time.sleep(_POLL_S)


def _listing_s(root: Path) -> float:
    t0 = time.perf_counter()
    for dirpath, _, names in os.walk(root):
        for name in names:
            os.lstat(os.path.join(dirpath, name))
    return time.perf_counter() - t0


def _ingest_s(c: httpx.Client, files: list[Path]) -> float:
    t0 = time.perf_counter()
    jobs = []
    for p in files:
        resp = c.post(
            "/v1/ingest",
            json={"format": "text", "name": str(p), "content": p.read_text(encoding="utf-8")},
        )
        resp.raise_for_status()
        jobs.append(resp.json()["jobId"])
    for job in jobs:
        while c.get(f"/v1/ingest/{job}").json()["state"] in ("pending", "leased"):
            time.sleep(_POLL_S)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="telha-bench-sync-") as tmp:
        folder = Path(tmp)
        tree = folder / "tree"
        tree.mkdir()
        files = _write_tree(tree, args.files)
        config = write_config(
            folder, args.engine, workers={"in_process": ["text_worker", "connectors"]},
            quotas={"max_pending_jobs": 0}, connectors={"allowed_roots": [str(tree)]},
        )  # fmt: skip
        with ServerProcess(config) as srv:
            key = srv.create_key("bench", "sync")
            floor_key = srv.create_key("bench", f"floor-{uuid.uuid4()}")
            with httpx.Client(base_url=srv.base_url, headers={"x-api-key": key}, timeout=120) as c:
                made = c.post(
                    "/v1/connectors",
                    json={"kind": "folder", "settings": {"root": str(tree)}},
                )
                made.raise_for_status()
                cid = made.json()["connectorId"]
                first_s, first = _run(c, cid)
                step = 100  # 1%
                changed = files[::step]
                deleted = files[step // 2 :: step]
                for p in changed:
                    p.write_text(p.read_text(encoding="utf-8") + "changed\n", encoding="utf-8")
                for p in deleted:
                    p.unlink()
                second_s, second = _run(c, cid)
                events = c.get(f"/v1/ingest/{second['runId']}").json()["events"]
                pages = sum(e["transition"] == "partial" for e in events)
                done = next(e.get("detail") for e in events if e["transition"] == "completed")
                retire_ms = (done or "").rpartition("retire_ms=")[2] or "(not recorded)"
            listing_s = _listing_s(tree)
            with httpx.Client(
                base_url=srv.base_url, headers={"x-api-key": floor_key}, timeout=120
            ) as f:
                ingest_s = _ingest_s(f, changed)
            srv.stop()
    counts = {k: second[k] for k in ("listed", "added", "changed", "unchanged", "retired")}
    floor = listing_s + ingest_s
    ratio = second_s / floor
    print(f"files {args.files}, engine {args.engine}; load average before {load0}, after"
          f" {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"first run (everything new): {first_s:.2f} s, {args.files / first_s:.0f} files/s"
          f" (added {first['added']})")  # fmt: skip
    print(f"second run (1% changed, 1% deleted): {second_s:.2f} s; counts {counts}")
    run_s = (second["updatedAt"] - second["createdAt"]) / 1e6
    print(
        f"  the run job (lease, listing sent in {pages} pages, core's answers, the changed"
        f" files read and their item jobs enqueued page by page, the retires) ended after"
        f" {run_s:.2f} s, of which the retires {retire_ms} ms; the last item job"
        f" {second_s - run_s:.2f} s after it"
    )
    print(f"floor: listing {listing_s:.3f} s + ingesting the {len(changed)} changed files"
          f" {ingest_s:.2f} s = {floor:.2f} s")  # fmt: skip
    verdict = "PASS" if ratio <= 1.3 else "FAIL"
    print(f"second run / floor = {ratio:.2f} (target <= 1.3): {verdict}")
    ok = second["unchanged"] == args.files - len(changed) - len(deleted)
    print(f"unchanged files not read (by marker): {second['unchanged']} ({'ok' if ok else 'NO'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
