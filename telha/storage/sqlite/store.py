"""The SQLite storage engine and its actor: one writer, a pool of WAL readers.

Writes are serialised by one lock over the single writer connection; each write is one
``BEGIN IMMEDIATE`` transaction, so a failure leaves nothing behind. This module holds the
actor; the operations are those written once for both engines
(:class:`~telha.storage.core.operations.SharedOps`: the aggregates it composes, over this
engine's runners).
"""

from __future__ import annotations

import anyio
import anyio.abc

from telha.storage.core.operations import SharedOps
from telha.storage.sqlite.base import SqliteBase, _nothing
from telha.storage.sqlite.checkpointer import Checkpointer

__all__ = ["SqliteStore"]


class SqliteStore(SharedOps, SqliteBase):
    """SQLite implementation of :class:`telha.storage.protocol.Storage`.

    Use as an actor (``await tg.start(store.run)`` reports the opened store) or, in short-lived
    tools, as ``async with SqliteStore(path) as store``.
    """

    async def run(self, *, task_status: anyio.abc.TaskStatus[SqliteStore]) -> None:
        """Actor body: open, start the WAL checkpointer, report ``self`` as started, wait for
        cancellation, close (shielded, once no write transaction is queued, so none is cut
        in half)."""
        await self.open()
        try:
            async with anyio.create_task_group() as tg:
                checkpointer = Checkpointer(self.path)
                await tg.start(checkpointer.run)
                self._on_commit = checkpointer.committed
                task_status.started(self)
                await anyio.sleep_forever()
        finally:
            self._on_commit = _nothing
            with anyio.CancelScope(shield=True):
                await self.writes_drained()
                await self.close()

    def job_wakeups(self) -> None:
        """No cross-process wake-ups: one ``telha serve`` owns an SQLite file, and its
        in-process wake-ups see every enqueue (see :meth:`Storage.job_wakeups`)."""
        return None
