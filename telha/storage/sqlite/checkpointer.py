"""The WAL checkpointer actor: moves committed pages from the WAL into the database file off
the write path (the writer connection runs with a high ``wal_autocheckpoint`` backstop only).

Left to SQLite, the committing connection checkpoints whenever the WAL passes 1,000 pages,
which puts a copy of every large ingest's pages on that request's latency. Here a separate
connection runs ``PRAGMA wal_checkpoint(PASSIVE)`` shortly after commits: it never blocks
the writer or readers, and copies whatever they do not hold.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite
import anyio
import anyio.abc
import structlog

__all__ = ["Checkpointer"]

log = structlog.get_logger("telha.storage")


class Checkpointer:
    """Checkpoints ``path`` at most every ``debounce_s`` seconds while commits keep coming.

    :param path: the SQLite database file.
    :param debounce_s: delay after a commit before checkpointing (batches bursts).
    """

    def __init__(self, path: Path, *, debounce_s: float = 0.25) -> None:
        self._path = path
        self._debounce_s = debounce_s
        self._dirty = anyio.Event()

    def committed(self) -> None:
        """Tell the checkpointer a transaction committed (cheap; call after every commit)."""
        self._dirty.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Actor body: checkpoint after commits until cancelled; a failed checkpoint is logged
        and retried on the next commit (SQLite's autocheckpoint backstop still applies)."""
        conn = await aiosqlite.connect(self._path, isolation_level=None)
        try:
            await conn.execute("PRAGMA busy_timeout=1000")
            task_status.started()
            while True:
                await self._dirty.wait()
                self._dirty = anyio.Event()
                await anyio.sleep(self._debounce_s)
                try:
                    await conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:
                    log.warning("wal_checkpoint_failed", error=str(exc))
        finally:
            # Shielded: a cancelled close would leave its thread to answer a loop that is gone
            # (and a statement still running on it would outlive the actor).
            with anyio.CancelScope(shield=True):
                await conn.close()
