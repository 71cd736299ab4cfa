"""Connections of the SQLite engine (DESIGN.md §4): one writer behind a lock, a bounded pool
of read-only WAL readers, the transaction helper every write goes through, and the scope
interning all tables share. The engine's operations are mixins over this base.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, Self

import aiosqlite
import anyio

from telha.errors import StorageError
from telha.ids import TxClock
from telha.model import Scope
from telha.storage.sqlite.migrate import apply_migrations

__all__ = ["SqliteBase"]

#: WAL size (pages) at which the committing connection checkpoints itself, should the
#: Checkpointer fall behind.
_AUTOCHECKPOINT_PAGES = 16384


def _nothing() -> None:
    pass


class SqliteBase:
    """Connections, the write transaction helper and scope ids.

    :param path: the database file; its folder is created if missing.
    :param synchronous: ``"normal"`` (WAL default) or ``"full"``.
    :param readers: size of the read connection pool.
    """

    def __init__(
        self, path: Path, *, synchronous: Literal["normal", "full"] = "normal", readers: int = 2
    ) -> None:
        self.path = path
        self._synchronous = synchronous.upper()
        self._n_readers = readers
        self._writer: aiosqlite.Connection | None = None
        self._write_lock = anyio.Lock()
        self._pool_send: Any = None
        self._pool_recv: Any = None
        self._readers: list[aiosqlite.Connection] = []
        self._scopes: dict[Scope, int] = {}
        self._clock = TxClock()
        self._on_commit: Callable[[], None] = _nothing

    async def open(self) -> None:
        """Open the writer, apply migrations, load the clock, open the readers."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._writer = await self._connect(readonly=False)
            await self._writer.execute("PRAGMA journal_mode=WAL")
            # Backstop only: the Checkpointer actor checkpoints off the write path.
            await self._writer.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT_PAGES}")
            await apply_migrations(self._writer)
            self._clock = TxClock(await self._max_tx())
            self._pool_send, self._pool_recv = anyio.create_memory_object_stream[
                aiosqlite.Connection
            ](self._n_readers)
            for _ in range(self._n_readers):
                conn = await self._connect(readonly=True)
                self._readers.append(conn)
                self._pool_send.send_nowait(conn)
        except sqlite3.Error as exc:
            await self.close()
            raise StorageError(f"cannot open {self.path}: {exc}") from exc

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

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            await self.close()

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
            # A 2.3 MB JSON batch dirties ~10 MB of pages: keep them in memory until COMMIT.
            await conn.execute("PRAGMA cache_size=-65536")
        except BaseException:
            # Not a database (or unreadable): close, or its thread keeps the process alive.
            with anyio.CancelScope(shield=True):
                await conn.close()
            raise
        return conn

    async def _max_tx(self) -> int:
        assert self._writer is not None
        sql = (
            "SELECT max(coalesce((SELECT max(tx) FROM source_versions), 0),"
            " coalesce((SELECT max(tx_from) FROM nodes), 0),"
            " coalesce((SELECT max(tx_to) FROM nodes), 0),"
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

    async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._reader() as conn, conn.execute(sql, params) as cur:
            return [tuple(r) for r in await cur.fetchall()]

    async def _scope_id(self, scope: Scope, *, create: bool) -> int | None:
        """The interned id of ``scope``; with ``create``, inserted inside the caller's open write
        transaction. Only ids read back from committed data are cached, so a rolled-back insert
        never leaves a stale id behind."""
        cached = self._scopes.get(scope)
        if cached is not None:
            return cached
        sql = "SELECT scope_id FROM scopes WHERE tenant_id = ? AND organization_id = ?"
        params = (scope.tenant_id, scope.organization_id)
        if create:
            w = self._require_writer()
            await w.execute(
                "INSERT OR IGNORE INTO scopes (tenant_id, organization_id) VALUES (?, ?)", params
            )
            async with w.execute(sql, params) as cur:
                row = await cur.fetchone()
            return int(row[0]) if row else None
        rows = await self._fetchall(sql, params)
        if not rows:
            return None
        self._scopes[scope] = int(rows[0][0])
        return self._scopes[scope]

    def _require_writer(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise StorageError("store is not open")
        return self._writer

    async def _rollback(self) -> None:
        w = self._writer
        if w is not None and w.in_transaction:
            with anyio.CancelScope(shield=True):
                await w.execute("ROLLBACK")

    @staticmethod
    async def _latest_hashes(
        w: aiosqlite.Connection, sid: int, source_id: bytes
    ) -> tuple[bytes, bytes | None, bytes | None] | None:
        """``(content_hash, canonical_text_hash, job_id)`` of a source's latest version, read
        inside the caller's write transaction (the dedup rules of spec 004)."""
        async with w.execute(
            "SELECT content_hash, canonical_text_hash, job_id FROM source_versions"
            " WHERE scope_id = ? AND source_id = ? ORDER BY tx DESC LIMIT 1",
            (sid, source_id),
        ) as cur:
            row = await cur.fetchone()
        return (row[0], row[1], row[2]) if row is not None else None

    @asynccontextmanager
    async def _transaction(self, what: str) -> AsyncIterator[aiosqlite.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on the writer, under the write lock.

        Commits when the body ends with the transaction still open (a body may ``ROLLBACK``
        itself to write nothing); rolls back on any error. ``sqlite3`` errors become
        :class:`StorageError` ("cannot {what}: ...").
        """
        async with self._write_lock:
            w = self._require_writer()
            try:
                await w.execute("BEGIN IMMEDIATE")
                yield w
                if w.in_transaction:
                    await w.execute("COMMIT")
                    self._on_commit()
            except sqlite3.Error as exc:
                await self._rollback()
                raise StorageError(f"cannot {what}: {exc}") from exc
            except BaseException:
                await self._rollback()
                raise
