"""What the operation mixins of :mod:`telha.storage.core` need from an engine: a runner for
one write transaction and one for a read, each handing the operation a
:class:`~telha.storage.core.tx.Tx` (docs/architecture.md, "The storage seam")."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["EngineOps", "Op"]

T = TypeVar("T")

#: An operation: ``async def op(tx, *args) -> T``.
Op = Callable[..., Coroutine[Any, Any, T]]


class EngineOps:
    """Base of the operation mixins; each engine's base class implements both runners."""

    async def _transaction(self, what: str, op: Op[T], *args: Any) -> T:
        """Run ``op(tx, *args)`` as one write transaction and return its result: committed
        when it returns, rolled back when it raises (:class:`~telha.storage.core.tx.Rollback`
        returns its value).

        :raises StorageError: the driver failed (``what`` names the operation in the
            message); nothing was written.
        """
        raise NotImplementedError

    async def _read(self, op: Op[T], *args: Any) -> T:
        """Run ``op(tx, *args)`` on a read connection (no write may happen).

        :raises StorageError: the driver failed.
        """
        raise NotImplementedError
