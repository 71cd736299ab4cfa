"""Connections of the SQLite engine (docs/architecture.md): one writer behind a lock, a bounded pool
of read-only WAL readers, the transaction helper every write goes through, and the scope
interning all tables share. The store (:class:`~telha.storage.sqlite.store.SqliteStore`) is
the shared operations and their aggregates over this base.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import aiosqlite
import anyio
import structlog

from telha.domain.errors import StorageError
from telha.domain.ids import TxClock
from telha.domain.model import Scope
from telha.storage.core.engine import EngineOps, Op
from telha.storage.core.migrations import require_current
from telha.storage.core.tx import Rollback, drive
from telha.storage.job_watch import JobEventSignal
from telha.storage.search.index import set_search
from telha.storage.sqlite.migrate import apply_migrations
from telha.storage.sqlite.tx import SqliteSnapshotTx, SqliteTx

__all__ = ["SqliteBase", "reader_pragmas"]

T = TypeVar("T")

log = structlog.get_logger("telha.storage")

#: WAL size (pages) at which the committing connection checkpoints itself, should the
#: Checkpointer fall behind.
_AUTOCHECKPOINT_PAGES = 16384


#: Page cache per connection (KiB): bounded, so the server's memory does not grow with the
#: database (peak RSS is a figure the tabular benchmark checks). The writer's 64 MiB holds
#: the pages a large source's versions keep inserting into at random places — its match
#: key index (docs/architecture.md, "Versions and node identity") — beside the ~10 MB a
#: 10,000-row partial dirties: a 200,000-row CSV ingests in 12 s with it, 26 s with 16 MiB
#: (bench/tabular.py, peak server RSS 362 MB against 322 MB).
_WRITER_CACHE_KIB = 64 * 1024
_READER_CACHE_KIB = 8 * 1024


def reader_pragmas(mmap_bytes: int) -> list[str]:
    """The ``PRAGMA`` statements that set a read connection apart from the writer: its page
    cache (8 MiB) and the bytes of the file it maps (``mmap_bytes``; 0: none; SQLite caps
    it at 2,047 MiB). :class:`SqliteBase` runs them on every reader; ``bench/search.py``
    sets its mapped floor's connection with them."""
    return [f"PRAGMA cache_size=-{_READER_CACHE_KIB}", f"PRAGMA mmap_size={mmap_bytes}"]


def _nothing() -> None:
    pass


class SqliteBase(EngineOps):
    """Connections, the write transaction helper and scope ids.

    :param path: the database file; its folder is created if missing.
    :param synchronous: ``"normal"`` (WAL default) or ``"full"``.
    :param readers: size of the read connection pool.
    :param reader_mmap_mib: MiB of the file each reader maps (``PRAGMA mmap_size``; SQLite
        caps it at 2,047 MiB; 0: none). A full-text search reads its doclists' pages
        without a ``pread`` each: 10–15 % less time a search (bench/RESULTS.md, "Readers
        map the file"). The mapped pages a reader touched count in the process's RSS as
        file-backed pages (``RssFile``), which the kernel reclaims like its page cache.
    :param readonly: open no writer and apply no migrations (``telha check``): only the
        ``mode=ro`` readers, on a database whose schema must be current. Writes then raise
        :class:`StorageError`.
    :param search: keep the full-text index (``[search] enabled``); at open the index has
        its build recorded or it is emptied to match
        (:func:`telha.storage.search.index.set_search`).
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Literal["normal", "full"] = "normal",
        readers: int = 2,
        reader_mmap_mib: int = 2047,
        readonly: bool = False,
        search: bool = True,
    ) -> None:
        self.path = path
        #: ``[search] enabled``: whether writes keep the full-text index.
        self.search_enabled = search
        self._readonly = readonly
        self._synchronous = synchronous.upper()
        self._n_readers = readers
        self._reader_mmap_bytes = reader_mmap_mib * 1024 * 1024
        self._writer: aiosqlite.Connection | None = None
        #: Write transactions handed to the writer's thread and not yet answered (each
        #: caller awaits its own; :meth:`_write`), and the event set when none is.
        self._writes = 0
        self._writes_done = anyio.Event()
        self._writes_done.set()
        self._pool_send: Any = None
        self._pool_recv: Any = None
        self._readers: list[aiosqlite.Connection] = []
        self._scopes: dict[Scope, int] = {}
        self._new_scopes: dict[Scope, int] = {}
        #: Lease heads known to exist (never removed), and those the running write
        #: transaction saw, moved over when it commits (:meth:`_in_transaction`).
        self._heads: set[tuple[int, str]] = set()
        self._new_heads: set[tuple[int, str]] = set()
        self._clock = TxClock()
        self._on_commit: Callable[[], None] = _nothing
        #: Wakes readers of a job's events once a transaction that wrote some commits.
        self.job_events = JobEventSignal()

    @property
    def location(self) -> str:
        """Where the data lives, for logs: the database file."""
        return str(self.path)

    async def open(self) -> None:
        """Open the writer, apply migrations, load the clock, open the readers (read-only:
        the readers alone, after checking the schema is current).

        :raises StorageError: the file cannot be opened (read-only: or is missing, or its
            schema is older than this build's).
        """
        try:
            if not self._readonly:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._writer = await self._connect(readonly=False)
                await self._writer.execute("PRAGMA journal_mode=WAL")
                # Backstop only: the Checkpointer actor checkpoints off the write path.
                await self._writer.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT_PAGES}")
                await apply_migrations(self._writer)
                self._clock = TxClock(await self._max_tx())
                await self.transaction("set up the search index", set_search)
            self._pool_send, self._pool_recv = anyio.create_memory_object_stream[
                aiosqlite.Connection
            ](self._n_readers)
            for _ in range(self._n_readers):
                conn = await self._connect(readonly=True)
                self._readers.append(conn)
                self._pool_send.send_nowait(conn)
            if self._readonly:
                await self._check_schema()
        except sqlite3.Error as exc:
            await self.close()
            raise StorageError(f"cannot open {self.path}: {exc}") from exc
        except StorageError:
            await self.close()
            raise

    async def _check_schema(self) -> None:
        try:
            async with self._reader() as conn:
                rows = await conn.execute_fetchall(
                    "SELECT coalesce(max(version), 0) FROM schema_migrations"
                )
        except StorageError as exc:
            raise StorageError(f"{self.path} is not a Telha database ({exc})") from exc
        require_current(str(self.path), int(next(iter(rows))[0]), "telha.storage.sqlite")

    async def close(self) -> None:
        """Close every connection; an open write transaction is rolled back by SQLite."""
        for conn in self._readers:
            await conn.close()
        self._readers.clear()
        if self._pool_send is not None:
            self._pool_send.close()
            self._pool_recv.close()
            self._pool_send = self._pool_recv = None
        if self._writer is not None:
            await self._writer.close()
            self._writer = None

    def channel_statistics(self) -> dict[str, Any]:
        """``{"storage.readers": statistics()}`` of the bounded pool of idle read connections
        (an anyio memory object stream: items = idle readers, waiting receivers = reads
        queued for a connection); empty while the store is closed."""
        if self._pool_recv is None:
            return {}
        return {"storage.readers": self._pool_recv.statistics()}

    def writers_waiting(self) -> int:
        """Write transactions queued behind the one the writer's thread runs now."""
        return max(0, self._writes - 1)

    async def writes_drained(self) -> None:
        """Return once no write transaction is queued or running (a close after it cuts
        none in half)."""
        while self._writes:
            await self._writes_done.wait()

    async def _connect(self, *, readonly: bool) -> aiosqlite.Connection:
        if readonly:
            conn = await aiosqlite.connect(
                f"file:{self.path}?mode=ro", uri=True, isolation_level=None
            )
        else:
            conn = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            await conn.execute("PRAGMA busy_timeout=5000")
            await conn.execute(f"PRAGMA synchronous={self._synchronous}")
            await conn.execute("PRAGMA foreign_keys=ON")
            # Erasure (docs/operations.md, "Erasure"): deleted and overwritten content is
            # zeroed in the pages.
            await conn.execute("PRAGMA secure_delete=ON")
            # The writer: a 2.3 MB JSON batch or a 10,000-row partial dirties ~10 MB of pages,
            # kept in memory until COMMIT. Readers serve small pages and slices.
            settings = (
                reader_pragmas(self._reader_mmap_bytes)
                if readonly
                else [f"PRAGMA cache_size=-{_WRITER_CACHE_KIB}"]
            )
            for pragma in settings:
                await conn.execute(pragma)
        except BaseException:
            # Not a database (or unreadable): close, or its thread keeps the process alive.
            with anyio.CancelScope(shield=True):
                await conn.close()
            raise
        return conn

    async def _max_tx(self) -> int:
        """The latest transaction time (µs) any stored row carries: the clock starts after
        it. Node rows are read in one pass (no index holds ``tx_to``)."""
        assert self._writer is not None
        sql = (
            "SELECT max(coalesce((SELECT max(tx) FROM source_versions), 0),"
            " coalesce((SELECT max(max(tx_from, coalesce(tx_to, 0))) FROM nodes), 0),"
            " coalesce((SELECT max(tx_from) FROM edges), 0))"
        )
        async with self._writer.execute(sql) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[aiosqlite.Connection]:
        if self._pool_recv is None:
            raise StorageError("store is not open")
        conn = await self._pool_recv.receive()
        try:
            yield conn
        except sqlite3.Error as exc:
            raise StorageError(f"read failed: {exc}") from exc
        finally:
            self._pool_send.send_nowait(conn)

    def _tx_scope_id(self, conn: sqlite3.Connection, scope: Scope) -> int:
        """The id of ``scope``, interned inside the current write transaction (writer thread).
        Only ids of committed transactions reach the cache (see :meth:`_write`)."""
        known = self._known_scope(conn, scope)
        if known is not None:
            return known
        cur = conn.execute(
            "INSERT INTO scopes (tenant_id, organization_id) VALUES (?, ?)",
            (scope.tenant_id, scope.organization_id),
        )
        self._new_scopes[scope] = int(cur.lastrowid or 0)
        return self._new_scopes[scope]

    def _known_scope(self, conn: sqlite3.Connection, scope: Scope) -> int | None:
        """The id of ``scope`` inside the open write transaction (writer thread): interned by
        it, or committed; ``None`` when the scope never wrote."""
        return self._new_scopes.get(scope) or self._committed_scope(conn, scope)

    def _committed_scope(self, conn: sqlite3.Connection, scope: Scope) -> int | None:
        """The id of ``scope`` as committed, read on ``conn``'s own thread (a reader never
        sees what the writer's open transaction interned); ``None`` when it never wrote."""
        cached = self._scopes.get(scope)
        if cached is not None:
            return cached
        row = conn.execute(
            "SELECT scope_id FROM scopes WHERE tenant_id = ? AND organization_id = ?",
            (scope.tenant_id, scope.organization_id),
        ).fetchone()
        if row is None:
            return None
        self._scopes[scope] = int(row[0])
        return self._scopes[scope]

    async def transaction(self, what: str, op: Op[T], *args: Any) -> T:
        """See :meth:`telha.storage.core.engine.EngineOps.transaction`: ``op`` runs whole on
        the writer's thread (:meth:`_write`); once it committed, the readers of the jobs it
        wrote events of are woken (:attr:`job_events`)."""
        done: list[SqliteTx] = []

        def body(conn: sqlite3.Connection) -> T:
            tx = SqliteTx(
                conn,
                known=self._known_scope,
                intern=self._tx_scope_id,
                clock=self._clock,
                heads=(self._heads, self._new_heads),
            )
            tx.search = self.search_enabled
            result = drive(op(tx, *args))  # a Rollback skips the next line: nothing written
            done.append(tx)
            return result

        result = await self._write(what, body)
        if done:
            self.job_events.signal(done[0].event_jobs)
        return result

    async def read(self, op: Op[T], *args: Any) -> T:
        """See :meth:`telha.storage.core.engine.EngineOps.read`: ``op`` runs whole on one
        pooled reader's thread, in one read transaction (a consistent snapshot)."""

        def body(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN")
            try:
                return drive(op(SqliteTx(conn, known=self._committed_scope), *args))
            finally:
                conn.execute("ROLLBACK")

        async with self._reader() as reader:
            # aiosqlite has no public "run this on the connection's thread" (see _write).
            result = await reader._execute(body, reader._conn)  # type: ignore[no-untyped-call]
        return cast(T, result)

    async def erasure_finished(self) -> None:
        """After an erasure's ``finish`` (see :class:`~telha.storage.erasure.aggregate.Erasure`):
        copy every WAL frame into the database file and truncate the WAL to zero bytes, so no
        frame keeps an older page holding erased bytes (``secure_delete`` zeroed them in the
        pages). Retried (50 times, 0.1 s apart) while readers hold old snapshots. Each try
        runs on the writer's thread between two transactions (so no write lands during
        it), never the wait between tries: a
        long ``telha check`` snapshot must not stall every write of the service meanwhile
        (writes landing in between carry no erased bytes, and the next try checkpoints them
        too)."""
        for _ in range(50):
            w = self._require_writer()
            # One call on the writer's thread, between two transactions.
            row = await w._execute(_checkpoint, w._conn)  # type: ignore[no-untyped-call]
            if row is not None and row[0] == 0:
                return
            await anyio.sleep(0.1)
        log.warning("erasure_checkpoint_busy", db=str(self.path))

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[SqliteSnapshotTx]:
        """See :meth:`telha.storage.core.engine.EngineOps.snapshot`: one pooled ``mode=ro``
        reader inside ``BEGIN`` (WAL keeps it stable while the writer commits, and the WAL
        cannot be checkpointed past it meanwhile)."""
        async with self._reader() as conn:
            await conn.execute("BEGIN")
            # A read transaction takes its snapshot at its first read, not at BEGIN.
            await conn.execute_fetchall("SELECT count(*) FROM scopes")
            try:
                yield SqliteSnapshotTx(conn)
            except sqlite3.Error as exc:
                raise StorageError(f"scan failed: {exc}") from exc
            finally:
                # Even when cancelled: the reader goes back to the pool out of the snapshot.
                with anyio.CancelScope(shield=True):
                    await conn.execute("ROLLBACK")

    def _require_writer(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise StorageError("store is read-only" if self._readonly else "store is not open")
        return self._writer

    async def _write(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` as one ``BEGIN IMMEDIATE`` transaction on the writer's own
        thread: one hand-off per transaction, not one per statement.

        Transactions queue on the writer's thread in call order (aiosqlite's queue): the
        thread runs one after the other without waiting for the event loop in between, and
        each caller is woken as its own transaction commits (each its own ``BEGIN`` …
        ``COMMIT``: no caller waits for a later one's; bench/RESULTS.md, "Third round").

        ``fn`` is synchronous and gets the raw ``sqlite3.Connection``; it may ``ROLLBACK``
        itself to write nothing. Any exception rolls back. The await is shielded: a caller
        cancelled mid-commit still learns the outcome. ``sqlite3`` errors become
        :class:`StorageError`.
        """
        with anyio.CancelScope(shield=True):
            w = self._require_writer()
            self._writes += 1
            if self._writes == 1:
                self._writes_done = anyio.Event()
            try:
                # aiosqlite has no public "run this on the connection's thread";
                # _execute/_conn are stable across the pinned 0.22 line.
                result, committed = await w._execute(  # type: ignore[no-untyped-call]
                    self._in_transaction, w._conn, fn, args
                )
            except sqlite3.Error as exc:
                raise StorageError(f"cannot {what}: {exc}") from exc
            finally:
                self._writes -= 1
                if not self._writes:
                    self._writes_done.set()
        if committed:
            self._on_commit()
        return cast(T, result)

    def _in_transaction(
        self, conn: sqlite3.Connection, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> tuple[T, bool]:
        """``(fn's result, whether it committed)``, on the writer's thread; False when the
        body rolled back itself (or raised :class:`Rollback`, whose value is the result).
        Scope ids it interned and lease heads it saw reach the caches once it committed,
        before the next transaction starts."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                try:
                    result = fn(conn, *args)
                except Rollback as rb:
                    conn.execute("ROLLBACK")
                    return rb.value, False
                if not conn.in_transaction:
                    return result, False
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self._scopes.update(self._new_scopes)
            self._heads.update(self._new_heads)
            return result, True
        finally:
            self._new_scopes.clear()
            self._new_heads.clear()


def _checkpoint(conn: sqlite3.Connection) -> tuple[int, int, int] | None:
    """``PRAGMA wal_checkpoint(TRUNCATE)``'s row: (busy, WAL frames, frames checkpointed)."""
    row: tuple[int, int, int] | None = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return row
