"""The storage seam: the transaction interface every storage operation is written against.

Each operation of :mod:`telha.storage.core` is one ``async`` function over a :class:`Tx`,
written once for both engines (see docs/architecture.md, "The storage seam"):

- SQL is written with ``?`` placeholders; the PostgreSQL driver numbers them (``$1``…).
  Where the dialects differ, an operation asks :attr:`Tx.dialect` for its text
  (:class:`~telha.storage.core.dialect.Dialect`), never which engine it runs on.
- Locking primitives are methods or SQL suffixes that are no-ops on SQLite, whose single
  writer already serialises every write: :meth:`Tx.lock_sources` (the per-source advisory
  locks of dedup), :attr:`Tx.for_update` / :attr:`Tx.skip_locked` (row locks),
  :meth:`Tx.notify` (wake pollers on every replica once the transaction commits).
- SQLite runs the operation on its writer thread: its :class:`Tx` methods never suspend,
  so :func:`drive` completes the coroutine in one ``send`` — one thread hand-off per
  transaction. PostgreSQL awaits it on an asyncpg connection inside a transaction.

An operation raises :class:`Rollback` to write nothing and return a value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from telha.domain.model import Scope
from telha.domain.rows import VersionRows
from telha.storage.core.dialect import Dialect

__all__ = ["Rollback", "SnapshotTx", "Tx", "any_groups", "drive"]

T = TypeVar("T")


class Rollback(Exception):
    """Raised inside an operation: roll the transaction back and return ``value``."""

    def __init__(self, value: Any) -> None:
        super().__init__("rollback")
        self.value = value


class Tx(Protocol):
    """One open transaction of either engine (or, for reads, one read snapshot).

    Rows come back as tuples in select order. Driver errors surface as
    :class:`~telha.domain.errors.StorageError` from the engine's transaction runner.
    """

    #: The engine's SQL where the two differ.
    dialect: Dialect
    #: ``" FOR UPDATE"`` on PostgreSQL (lock the selected rows until the transaction ends),
    #: ``""`` on SQLite.
    for_update: str
    #: ``" FOR UPDATE SKIP LOCKED"`` on PostgreSQL, ``""`` on SQLite.
    skip_locked: str
    #: Whether the store keeps the full-text index (``[search] enabled``; see
    #: :mod:`telha.storage.search.index`).
    search: bool

    async def execute(self, sql: str, *params: Any) -> int:
        """Run one statement; returns the number of rows it changed."""

    async def fetchone(self, sql: str, *params: Any) -> tuple[Any, ...] | None:
        """The first row of a query, or ``None``."""

    async def fetchall(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Every row of a query."""

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement for each parameter row."""

    async def scope_id(self, scope: Scope) -> int:
        """The interned id of ``scope``, interned now if it is new."""

    async def known_scope_id(self, scope: Scope) -> int | None:
        """The interned id of ``scope``, or ``None`` when it never wrote (reads)."""

    async def next_tx(self) -> int:
        """The next transaction time (µs), strictly greater than every earlier one in the
        store. PostgreSQL takes it from the clock row, which stays locked until the
        transaction ends: take it after every other lock."""

    async def rows_at_next_tx(self, build: Callable[[int], VersionRows]) -> VersionRows:
        """Take the next transaction time (:meth:`next_tx`, the last lock a write takes)
        and a new version's rows at it, ``build(tx_time)``. PostgreSQL's clock row stays
        locked from :meth:`next_tx` to the commit, so there the rows are built first, at
        :data:`~telha.domain.rows.PENDING_TX`, and moved to the time taken
        (:func:`~telha.domain.rows.at_tx`): every commit of every replica waits for that
        lock. SQLite's clock is the single writer's own: the rows are built at their time."""

    async def lock_sources(self, sid: int, source_ids: Sequence[bytes]) -> None:
        """Hold the ``(scope, source)`` locks of dedup until the transaction ends (no-op on
        SQLite)."""

    async def notify(self, fmt: str) -> None:
        """Wake pollers of ``fmt`` on every replica at commit (no-op on SQLite: in-process
        wake-ups see every enqueue)."""

    def head_known(self, sid: int, fmt: str) -> bool:
        """Whether lease head ``(sid, fmt)`` is known to exist without a read (lease heads
        are never removed: :mod:`telha.storage.jobs.fair_lease`): SQLite's single writer
        remembers every head a committed transaction saw; PostgreSQL knows none (``False``:
        read it)."""

    def head_noted(self, sid: int, fmt: str) -> None:
        """Note that lease head ``(sid, fmt)`` exists in this transaction: remembered once
        it commits (no-op on PostgreSQL)."""

    def wrote_event(self, job_id: bytes) -> None:
        """Note that this transaction appended an event to ``job_id``'s list: once it
        commits, the engine wakes that job's event readers (:mod:`telha.storage.job_watch`)."""

    async def write_rows(self, rows: VersionRows) -> None:
        """Write one version's rows (chunks, nodes, labels, edges, span rows merging
        on the same range, ambiguities) with the engine's bulk insert."""

    async def write_search_rows(self, sid: int, rows: Sequence[tuple[Any, ...]]) -> None:
        """Write scope ``sid``'s full-text index ``rows`` (``search_spans``' columns as
        :data:`~telha.storage.core.row_tables.SEARCH_COLS`, then the dialect's
        :meth:`~telha.storage.core.dialect.Dialect.search_columns`) and whatever the
        engine's index keeps beside them (SQLite: the rowids of the scope's range, newest
        lowest, and the FTS5 tables).

        :raises StorageError: the scope's index has no room for them (SQLite's range).
        """

    async def compute(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, pure work over ``size`` bytes of input, kept off the event loop:
        on PostgreSQL, whose operations run on the loop, in a worker thread once ``size``
        reaches :data:`~telha.offload.OFFLOAD_BYTES`; on SQLite, whose operations run on a
        connection's own thread, right there."""

    def driver_failed(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by this engine's driver inside an operation, means the
        store failed (connection lost, disk error, locked), not the row being read: a
        driver's data errors (a stored value that does not decode or convert) are the row's
        (:func:`telha.domain.row_faults.is_row_error`)."""


class SnapshotTx(Protocol):
    """A read-only snapshot held open for a whole block (``telha check``): real async calls,
    so the caller may suspend between them, and every query sees the store as of one
    instant. Driver errors leave the engine's snapshot block as
    :class:`~telha.domain.errors.StorageError`."""

    #: See :attr:`Tx.dialect`.
    dialect: Dialect

    async def fetchall(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Every row of a query."""

    def pages(self, sql: str, page: int, *params: Any) -> AsyncIterator[list[tuple[Any, ...]]]:
        """The rows of a query, streamed from one cursor in lists of at most ``page``."""


def any_groups(
    tx: Tx, column: str, values: Sequence[Any], pg_type: str
) -> list[tuple[str, tuple[Any, ...]]]:
    """:meth:`Dialect.any <telha.storage.core.dialect.Dialect.any>` over ``values`` in the
    groups one statement takes: a list of ``(condition, params)``, one per statement to run,
    covering ``values`` in order, each value in exactly one group: at most the dialect's
    :attr:`~telha.storage.core.dialect.Dialect.in_group` values a group (SQLite's statements
    take a bounded number of parameters), or every value at once (PostgreSQL: one array
    parameter). ``[]`` for no values: no statement to run. Raises nothing (a pure function
    of its arguments)."""
    step = tx.dialect.in_group or max(len(values), 1)
    return [
        tx.dialect.any(column, values[i : i + step], pg_type) for i in range(0, len(values), step)
    ]


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to completion, synchronously (SQLite's writer
    thread drives an operation over its :class:`Tx` this way).

    :raises RuntimeError: the coroutine suspended (it awaited something that is not a
        synchronous :class:`Tx` method).
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a storage operation suspended on SQLite's writer thread")
