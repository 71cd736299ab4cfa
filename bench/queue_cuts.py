"""Benchmark: the per-job cost of tiny ``format=text`` jobs, for A/B runs of two checkouts.

Runs ``bench/queue.py``'s in-process SQLite load and its gRPC load (4 worker processes) once
each against a real ``telha serve`` of the code on ``PYTHONPATH`` and prints one JSON line:
per path, jobs/s to the last completion, the CPU milliseconds of the server process per job
(steadier than jobs/s on a shared machine) and of the server with its child processes (the
handlers' process pool). With ``--profile FILE`` a ``py-spy record --format raw`` of
the in-process server goes to ``FILE``. Alternate two checkouts in a shell loop and take
medians (bench/RESULTS.md, "Per-job cuts").

Run: ``PYTHONPATH=<checkout>:<checkout>/workers .venv/bin/python bench/queue_cuts.py
[--jobs N] [--paths inproc,grpc]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location(
    "bench_queue", Path(__file__).resolve().parent / "queue.py"
)
assert _spec is not None and _spec.loader is not None
bq = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bq)


def tree_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds of ``pid`` and each live descendant (the handlers' pool processes)."""
    out: dict[int, float] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            out[p] = bq.cpu_s(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def main() -> int:
    """One run per path; prints ``{"path": [jobs/s, CPU ms per job], …}`` as JSON."""
    parser = argparse.ArgumentParser(prog="bench/queue_cuts.py")
    parser.add_argument("--jobs", type=int, default=bq.JOBS)
    parser.add_argument("--paths", default="inproc,grpc")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy raw output")
    args = parser.parse_args()
    local = {"in_process": ["text_worker"], "concurrency": 2}
    none: dict[str, Any] = {"in_process": []}
    out: dict[str, list[float]] = {}
    spy: subprocess.Popen[bytes] | None = None
    start = bq.ServerProcess.start

    def start_with_spy(self: Any) -> Any:
        nonlocal spy
        server = start(self)
        started.append(server.proc.pid)
        if args.profile is not None and spy is None:
            cmd = ["py-spy", "record", "--format", "raw", "-o", str(args.profile), "-r", "200"]
            cmd += ["--threads", "--pid", str(server.proc.pid)]
            spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return server

    bq.ServerProcess.start = start_with_spy
    tree: list[float] = []
    run_server = bq.run_server

    def run_counting_tree(*a: Any, **k: Any) -> Any:
        """``run_server`` with the server's process tree's CPU seconds appended to ``tree``
        (read before the drive and after it, the pool processes still alive)."""
        drive = bq.drive

        async def counted(*da: Any) -> Any:
            pid = started[-1]
            before = tree_cpu_s(pid)
            figures = await drive(*da)
            after = tree_cpu_s(pid)
            tree.append(sum(c - before.get(p, 0.0) for p, c in after.items()))
            return figures

        bq.drive = counted
        try:
            return run_server(*a, **k)
        finally:
            bq.drive = drive

    started: list[int] = []
    with tempfile.TemporaryDirectory(prefix="telha-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for path in args.paths.split(","):
            cpu: list[float] = []
            if path == "inproc":
                rate = run_counting_tree(tmp, local, args.jobs, None, cpu=cpu)
            else:
                rate = run_counting_tree(tmp, none, args.jobs, None, 4, 1, cpu=cpu)
            n = args.jobs + 32
            out[path] = [
                round(rate[0], 1),
                round(cpu[0] * 1000 / n, 3),
                round(tree[-1] * 1000 / n, 3),
            ]
    if spy is not None:
        spy.wait(30)
    out["load"] = [round(os.getloadavg()[0], 1)]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
