"""Connections of the PostgreSQL engine: an asyncpg pool shared by reads
and write transactions, the transaction helper every write goes through, the ``(scope,
source)`` advisory locks of dedup, and scope interning. (The database clock that orders
transaction time across replicas is taken by :meth:`~telha.storage.postgres.tx.PgTx.next_tx`.)

Unlike SQLite there is no single writer: several transactions (of this process and of other
replicas) run at once, so every operation that must not interleave takes a row or advisory
lock inside its own transaction (see :mod:`telha.storage.jobs.lifecycle`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import anyio
import asyncpg

from telha.domain.errors import StorageError
from telha.domain.model import Scope
from telha.storage.core.engine import EngineOps, Op
from telha.storage.core.migrations import require_current
from telha.storage.core.tx import Rollback
from telha.storage.job_watch import JobEventSignal
from telha.storage.postgres.migrate import apply_migrations
from telha.storage.postgres.tx import (
    DRIVER_ERRORS,
    Conn,
    PgSnapshotTx,
    PgTx,
)
from telha.storage.search.index import set_search

__all__ = ["PgBase"]

T = TypeVar("T")

#: SQLSTATEs of transactions PostgreSQL aborted to resolve a conflict: safe to run again.
_RETRY_STATES = frozenset({"40001", "40P01"})
_ATTEMPTS = 5


async def _keep_session(_conn: Any) -> None:
    """The pool's reset on release: nothing to send. Pooled sessions hold no state between
    operations (advisory locks are transaction-level; the migrator releases its session lock
    itself; no LISTEN, SET or cursor outside a transaction), and asyncpg still ends an open
    transaction. Saves the default reset query's round trip on every operation."""


class PgBase(EngineOps):
    """The pool, the transaction helper and scope ids.

    :param dsn: a libpq connection string (``postgresql://user@host:port/db``).
    :param pool_size: most pooled connections of this process (the LISTEN connection of
        :class:`~telha.storage.postgres.store.PostgresStore` is one more).
    :param readonly: apply no migrations (the schema must be current) and open every session
        with ``default_transaction_read_only`` on, so nothing can be written (``telha check``).
    :param search: keep the full-text index (``[search] enabled``); at open the index has
        its build recorded or it is emptied to match
        (:func:`telha.storage.search.index.set_search`).
    """

    def __init__(
        self, dsn: str, *, pool_size: int = 10, readonly: bool = False, search: bool = True
    ) -> None:
        self.dsn = dsn
        #: ``[search] enabled``: whether writes keep the full-text index.
        self.search_enabled = search
        self._readonly = readonly
        self._pool_size = pool_size
        self._waiting = 0  # writes waiting for a pooled connection (``writers_waiting``)
        self._pool: asyncpg.Pool | None = None
        self._scopes: dict[Scope, int] = {}
        #: Wakes this process's readers of a job's events once a transaction that wrote
        #: some commits (other replicas' readers find them by their periodic re-read).
        self.job_events = JobEventSignal()

    @property
    def location(self) -> str:
        """Where the data lives, for logs: the DSN without its password."""
        head, at, tail = self.dsn.rpartition("@")
        if not at:
            return self.dsn
        scheme, sep, user = head.partition("://")
        return f"{scheme}{sep}{user.split(':', 1)[0]}@{tail}"

    async def open(self) -> None:
        """Open the pool and apply migrations (under the migration lock; read-only: check
        that the schema is current instead).

        :raises StorageError: the database cannot be reached or migrated (read-only: or its
            schema is older than this build's).
        """
        settings = {"default_transaction_read_only": "on"} if self._readonly else None
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=self._pool_size,
                command_timeout=120,
                reset=_keep_session,
                server_settings=settings,
            )
            async with self._pool.acquire() as conn:
                if self._readonly:
                    await _check_schema(conn, self.location)
                else:
                    await apply_migrations(conn)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            await self.close()
            raise StorageError(f"cannot open {self.location}: {exc}") from exc
        except StorageError:
            await self.close()
            raise
        if not self._readonly:
            await self.transaction("set up the search index", set_search)

    async def close(self) -> None:
        """Close the pool (waits for connections in use to be given back, then closes)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            with anyio.move_on_after(10) as scope:
                await pool.close()
            if scope.cancelled_caught:
                pool.terminate()

    def channel_statistics(self) -> dict[str, Any]:
        """No anyio channels here (asyncpg's pool is its own): an empty mapping."""
        return {}

    def writers_waiting(self) -> int:
        """Writes waiting for a pooled connection now."""
        return self._waiting

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StorageError("store is not open")
        return self._pool

    async def _scope_id(self, scope: Scope, *, intern: bool = False) -> int | None:
        """The interned id of ``scope`` from the cache, else the store: ``None`` when the
        scope never wrote, unless ``intern`` (then interned in its own transaction; a scope
        without rows is harmless, so a later rollback need not undo it)."""
        cached = self._scopes.get(scope)
        if cached is not None:
            return cached
        if intern:
            return await self.transaction("intern scope", _intern_scope, scope)
        return await self.read(_known_scope, scope)

    async def erasure_finished(self) -> None:
        """After an erasure's ``finish`` (see :class:`~telha.storage.erasure.aggregate.Erasure`):
        nothing to do here. The old versions of the rows it updated or deleted stay in the
        table pages until VACUUM reclaims them; running it is the operator's step
        (docs/operations.md, "Erasure")."""

    async def transaction(self, what: str, op: Op[T], *args: Any) -> T:
        """See :meth:`telha.storage.core.engine.EngineOps.transaction`: ``op`` is awaited on
        a pooled connection inside one transaction (:meth:`_write`); scopes it interned are
        cached once it commits, and the readers of the jobs it wrote events of are woken."""
        committed: list[PgTx] = []

        async def body(conn: Conn) -> T:
            tx = PgTx(conn, self._scopes)
            tx.search = self.search_enabled
            result = await op(tx, *args)  # a Rollback skips the next line: nothing learned
            committed[:] = [tx]
            return result

        result = await self._write(what, body)
        if committed:  # _write returned, so the transaction that ran body last committed
            self._scopes.update(committed[0].new_scopes)
            self.job_events.signal(committed[0].event_jobs)
        return result

    async def read(self, op: Op[T], *args: Any) -> T:
        """See :meth:`telha.storage.core.engine.EngineOps.read`: ``op`` runs on one pooled
        connection, each statement its own snapshot (reads that need one snapshot use a
        repeatable-read transaction themselves)."""
        try:
            async with self._require_pool().acquire() as conn:
                tx = PgTx(conn, self._scopes)
                result = await op(tx, *args)
                self._scopes.update(tx.new_scopes)
                return result
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            raise StorageError(f"read failed: {exc}") from exc

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[PgSnapshotTx]:
        """See :meth:`telha.storage.core.engine.EngineOps.snapshot`: one ``READ ONLY``,
        ``REPEATABLE READ`` transaction on a pooled connection (every statement sees the
        database as of its first one, while the replicas go on committing)."""
        pool = self._require_pool()
        try:
            conn = await pool.acquire()
        except DRIVER_ERRORS as exc:
            raise StorageError(f"cannot scan {self.location}: {exc}") from exc
        try:
            tx = conn.transaction(isolation="repeatable_read", readonly=True)
            try:
                await tx.start()
            except DRIVER_ERRORS as exc:
                raise StorageError(f"cannot scan {self.location}: {exc}") from exc
            try:
                yield PgSnapshotTx(conn, self._scopes)
            except DRIVER_ERRORS as exc:
                raise StorageError(f"scan failed: {exc}") from exc
            finally:
                # Even when cancelled; a broken connection is the pool's to discard.
                with anyio.CancelScope(shield=True), suppress(*DRIVER_ERRORS):
                    await tx.rollback()
        finally:
            with anyio.CancelScope(shield=True):
                await pool.release(conn)

    async def _write(
        self, what: str, fn: Callable[..., Awaitable[T]], *args: Any, transaction: bool = True
    ) -> T:
        """Run ``await fn(conn, *args)`` in one transaction on a pooled connection
        (``transaction=False``: ``fn`` runs one statement, which is its own transaction; it
        saves the BEGIN and COMMIT round trips).

        ``fn`` may raise :class:`Rollback` to write nothing and return its value. A
        transaction PostgreSQL aborted to break a deadlock or a serialization conflict is run
        again (at most five times); other exceptions roll back and propagate. The await is
        shielded: a caller cancelled mid-commit still learns the outcome. Driver errors
        become :class:`StorageError` (``from`` the driver's).
        """
        pool = self._require_pool()
        with anyio.CancelScope(shield=True):
            for attempt in range(_ATTEMPTS):
                try:
                    self._waiting += 1
                    try:
                        conn = await pool.acquire()
                    finally:
                        self._waiting -= 1
                    try:
                        if not transaction:
                            return await fn(conn, *args)
                        async with conn.transaction():
                            return await fn(conn, *args)
                    except Rollback as rb:
                        return rb.value  # type: ignore[no-any-return]
                    finally:
                        await pool.release(conn)
                except asyncpg.PostgresError as exc:
                    if exc.sqlstate in _RETRY_STATES and attempt + 1 < _ATTEMPTS:
                        await anyio.sleep(0.01 * (attempt + 1))
                        continue
                    raise StorageError(f"cannot {what}: {exc}") from exc
                except (asyncpg.InterfaceError, OSError) as exc:
                    raise StorageError(f"cannot {what}: {exc}") from exc
        raise AssertionError("unreachable")


async def _check_schema(conn: Conn, location: str) -> None:
    if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
        raise StorageError(f"{location} holds no Telha schema")
    current = await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")
    require_current(location, int(current), "telha.storage.postgres")


async def _intern_scope(tx: PgTx, scope: Scope) -> int:
    return await tx.scope_id(scope)


async def _known_scope(tx: PgTx, scope: Scope) -> int | None:
    return await tx.known_scope_id(scope)
