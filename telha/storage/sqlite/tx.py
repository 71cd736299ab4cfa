"""The SQLite :class:`~telha.storage.core.tx.Tx`: synchronous ``sqlite3`` calls behind the
async interface, so an operation runs whole on one connection's thread
(:func:`~telha.storage.core.tx.drive`). Locks and NOTIFY are no-ops: one writer
serialises every write, and in-process wake-ups see every enqueue.

:class:`SqliteSnapshotTx` is the one exception: the read snapshot of ``telha check`` hands
control back to its caller between queries, so its methods are real ``aiosqlite`` calls."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import aiosqlite

from telha.domain.ids import TxClock
from telha.domain.model import Scope
from telha.domain.rows import VersionRows
from telha.storage.core.dialect import Dialect
from telha.storage.sqlite.dialect import SQLITE
from telha.storage.sqlite.rows import insert_rows
from telha.storage.sqlite.search_rows import insert_search_rows

__all__ = ["SqliteSnapshotTx", "SqliteTx"]

T = TypeVar("T")

#: What ``sqlite3`` says of a stored ``TEXT`` value that is not UTF-8 (a row's fault).
_UNDECODABLE = "Could not decode to UTF-8"


class SqliteTx:
    """One SQLite transaction (the writer's) or read snapshot (a reader's).

    :param conn: the raw connection, used on its own thread only.
    :param intern: ``intern(conn, scope) -> id`` for writes (``None`` on a reader).
    :param known: ``known(conn, scope) -> id | None``.
    :param clock: the store's transaction clock (``None`` on a reader).
    :param heads: the lease heads committed transactions saw (read-only here), and the set
        this transaction adds the heads it saw to (the store moves them into the first once
        it commits); ``None`` on a reader.
    """

    dialect: Dialect = SQLITE
    for_update = ""
    skip_locked = ""
    #: Set by the engine from ``[search] enabled`` (see :attr:`telha.storage.core.tx.Tx.search`).
    search = True

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        known: Callable[[sqlite3.Connection, Scope], int | None],
        intern: Callable[[sqlite3.Connection, Scope], int] | None = None,
        clock: TxClock | None = None,
        heads: tuple[set[tuple[int, str]], set[tuple[int, str]]] | None = None,
    ) -> None:
        self.conn = conn
        self._known = known
        self._intern = intern
        self._clock = clock
        self._heads = heads
        #: Jobs this transaction appended events to (:meth:`wrote_event`).
        self.event_jobs: set[bytes] = set()
        #: The lowest full-text index rowid this transaction gave each scope's rows.
        self._search_lowest: dict[int, int] = {}

    async def execute(self, sql: str, *params: Any) -> int:
        """See :meth:`telha.storage.core.tx.Tx.execute`."""
        return self.conn.execute(sql, params).rowcount

    async def fetchone(self, sql: str, *params: Any) -> tuple[Any, ...] | None:
        """See :meth:`telha.storage.core.tx.Tx.fetchone`."""
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    async def fetchall(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """See :meth:`telha.storage.core.tx.Tx.fetchall`."""
        return self.conn.execute(sql, params).fetchall()

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """See :meth:`telha.storage.core.tx.Tx.executemany`."""
        self.conn.executemany(sql, rows)

    async def scope_id(self, scope: Scope) -> int:
        """See :meth:`telha.storage.core.tx.Tx.scope_id`."""
        if self._intern is None:
            raise sqlite3.OperationalError("a read connection cannot intern a scope")
        return self._intern(self.conn, scope)

    async def known_scope_id(self, scope: Scope) -> int | None:
        """See :meth:`telha.storage.core.tx.Tx.known_scope_id`."""
        return self._known(self.conn, scope)

    async def next_tx(self) -> int:
        """The store clock's next value (the single writer orders every transaction)."""
        if self._clock is None:
            raise sqlite3.OperationalError("a read connection takes no transaction time")
        return self._clock.next()

    async def rows_at_next_tx(self, build: Callable[[int], VersionRows]) -> VersionRows:
        """The rows built at their time: the single writer's clock holds no lock (see
        :meth:`telha.storage.core.tx.Tx.rows_at_next_tx`)."""
        return build(await self.next_tx())

    async def lock_sources(self, sid: int, source_ids: Sequence[bytes]) -> None:
        """No-op: the single writer holds every lock."""

    async def notify(self, fmt: str) -> None:
        """No-op: in-process wake-ups see every enqueue."""

    def head_known(self, sid: int, fmt: str) -> bool:
        """See :meth:`telha.storage.core.tx.Tx.head_known`."""
        return self._heads is not None and (sid, fmt) in self._heads[0]

    def head_noted(self, sid: int, fmt: str) -> None:
        """See :meth:`telha.storage.core.tx.Tx.head_noted`."""
        if self._heads is not None:
            self._heads[1].add((sid, fmt))

    def wrote_event(self, job_id: bytes) -> None:
        """See :meth:`telha.storage.core.tx.Tx.wrote_event`."""
        self.event_jobs.add(job_id)

    async def write_rows(self, rows: VersionRows) -> None:
        """See :func:`telha.storage.sqlite.rows.insert_rows`."""
        insert_rows(self.conn, rows)

    async def write_search_rows(self, sid: int, rows: Sequence[tuple[Any, ...]]) -> None:
        """See :func:`telha.storage.sqlite.search_rows.insert_search_rows`."""
        insert_search_rows(self.conn, sid, rows, self._search_lowest)

    @staticmethod
    async def compute(size: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` here: an operation already runs on a connection's thread."""
        return fn(*args)

    @staticmethod
    def driver_failed(exc: BaseException) -> bool:
        """See :meth:`telha.storage.core.tx.Tx.driver_failed`: an ``sqlite3`` error but
        a data error or a stored text that is not UTF-8 (``Could not decode to UTF-8``)."""
        if not isinstance(exc, sqlite3.Error):
            return False
        return not (isinstance(exc, sqlite3.DataError) or _UNDECODABLE in str(exc))


class SqliteSnapshotTx:
    """A :class:`~telha.storage.core.tx.SnapshotTx` over one pooled reader inside ``BEGIN``
    (WAL: the writer goes on committing; this snapshot does not move)."""

    dialect: Dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    async def fetchall(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """See :meth:`telha.storage.core.tx.SnapshotTx.fetchall`."""
        return [tuple(r) for r in await self.conn.execute_fetchall(sql, params)]

    async def pages(
        self, sql: str, page: int, *params: Any
    ) -> AsyncIterator[list[tuple[Any, ...]]]:
        """See :meth:`telha.storage.core.tx.SnapshotTx.pages` (one cursor, ``fetchmany``)."""
        async with self.conn.execute(sql, params) as cur:
            while rows := await cur.fetchmany(page):
                yield [tuple(r) for r in rows]
