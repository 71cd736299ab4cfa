"""What the aggregates of :mod:`telha.storage.core` need from an engine: a runner for
one write transaction and one for a read, each handing the operation a
:class:`~telha.storage.core.tx.Tx`, and a read snapshot held open for a block (the whole-store
scan of ``telha check``) (docs/architecture.md, "The storage seam")."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Self, TypeVar

import anyio

from telha.storage.core.tx import SnapshotTx

__all__ = ["EngineOps", "Op"]

T = TypeVar("T")

#: An operation: ``async def op(tx, *args) -> T``.
Op = Callable[..., Coroutine[Any, Any, T]]


class EngineOps:
    """The runners every aggregate is composed over; each engine's base class implements them,
    :meth:`open` and :meth:`close` (``async with store`` opens it and closes it, shielded)."""

    #: ``[search] enabled``: the full-text index is kept (each engine's base sets it).
    search_enabled: bool

    async def open(self) -> None:
        """Open the store: its connections, and (unless read-only) its migrations.

        :raises StorageError: the store cannot be opened.
        """
        raise NotImplementedError

    async def close(self) -> None:
        """Close the store's connections (those in use are waited for)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            await self.close()

    async def transaction(self, what: str, op: Op[T], *args: Any) -> T:
        """Run ``op(tx, *args)`` as one write transaction and return its result: committed
        when it returns, rolled back when it raises (:class:`~telha.storage.core.tx.Rollback`
        returns its value).

        :raises StorageError: the driver failed (``what`` names the operation in the
            message); nothing was written.
        """
        raise NotImplementedError

    async def read(self, op: Op[T], *args: Any) -> T:
        """Run ``op(tx, *args)`` on a read connection (no write may happen).

        :raises StorageError: the driver failed.
        """
        raise NotImplementedError

    async def erasure_finished(self) -> None:
        """Run after an erasure's ``finish`` step committed, outside any transaction: the
        engine's cleanup of what the erasure overwrote (docs/operations.md, "Erasure").

        :raises StorageError: the cleanup failed (the erasure itself is committed).
        """
        raise NotImplementedError

    def snapshot(self) -> AbstractAsyncContextManager[SnapshotTx]:
        """A read connection held in one snapshot for as long as the ``async with`` block
        runs (SQLite: a pooled reader inside ``BEGIN``; PostgreSQL: a ``READ ONLY``,
        ``REPEATABLE READ`` transaction), rolled back at the end.

        :raises StorageError: the store cannot be read.
        """
        raise NotImplementedError
