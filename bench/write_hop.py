"""Benchmark: the CPU cost of one tiny SQLite write transaction through the store (the
writer lock, the hand-off to the writer's thread and back, ``BEGIN IMMEDIATE`` … ``COMMIT``
around one ``SELECT 1``): the fixed cost every enqueue, lease and commit pays.

CPU time of the whole process (event loop and writer threads), fastest of ``--rounds``
rounds of ``--tx`` transactions, on uvloop as ``telha serve`` runs. With ``--concurrency N``
the transactions are issued by N tasks at once (as 32 POSTs in flight and the consumers'
leases and commits queue behind the writer).

Run: ``PYTHONPATH=<checkout> .venv/bin/python bench/write_hop.py [--tx N] [--rounds N]
[--concurrency N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds a queue.py: drop it (sys.path[0]) so ``import queue`` finds the stdlib.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import tempfile
import time
from typing import Any

import anyio

from telha.storage.core.tx import Tx
from telha.storage.sqlite.store import SqliteStore


async def _one(tx: Tx) -> Any:
    return await tx.fetchone("SELECT 1")


async def _run(n: int, rounds: int, concurrency: int) -> float:
    with tempfile.TemporaryDirectory(prefix="telha-hop-") as folder:
        async with SqliteStore(Path(folder) / "hop.db") as store:

            async def some(count: int) -> None:
                for _ in range(count):
                    await store.transaction("hop", _one)

            best = float("inf")
            for _ in range(rounds):
                start = time.process_time()
                async with anyio.create_task_group() as tg:
                    for _ in range(concurrency):
                        tg.start_soon(some, n // concurrency)
                best = min(best, time.process_time() - start)
    return best / (n // concurrency * concurrency) * 1e6


def main() -> int:
    """Print CPU µs per transaction."""
    parser = argparse.ArgumentParser(prog="bench/write_hop.py")
    parser.add_argument("--tx", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    per = anyio.run(
        _run, args.tx, args.rounds, args.concurrency, backend_options={"use_uvloop": True}
    )
    print(
        f"{per:.1f} µs CPU per write transaction (fastest of {args.rounds} x {args.tx:,},"
        f" {args.concurrency} at once)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
