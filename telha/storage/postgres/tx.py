"""The PostgreSQL :class:`~telha.storage.core.tx.Tx`: an asyncpg connection inside one
transaction. ``?`` placeholders are numbered (``$1``…) once per SQL text; row locks are
``FOR UPDATE``; the ``(scope, source)`` locks of dedup are transaction-level advisory locks;
wake-ups are ``NOTIFY`` (delivered at commit); the transaction time comes from the clock row,
so it is strictly increasing across every replica."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from functools import lru_cache
from typing import Any, TypeAlias, TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from telha.domain.model import Scope
from telha.domain.rows import PENDING_TX, VersionRows, at_tx
from telha.offload import off_loop
from telha.storage.core.dialect import Dialect
from telha.storage.core.row_tables import SEARCH_COLS
from telha.storage.postgres.dialect import POSTGRES
from telha.storage.postgres.rows import insert_rows

__all__ = [
    "CHANNEL",
    "CLOCK",
    "DRIVER_ERRORS",
    "Conn",
    "PgSnapshotTx",
    "PgTx",
    "lock_sources",
    "numbered",
    "source_lock_key",
]

#: A connection of the pool (or a plain one: the migrator and LISTEN accept either).
Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"

#: What asyncpg raises when a statement or the connection fails.
DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)

#: The LISTEN/NOTIFY channel; the payload is the format whose jobs became available.
CHANNEL = "telha_jobs"

#: The next transaction time (µs): the clock row's, moved past the wall clock and its last value
#: (``telha_commit_single`` runs it too: :mod:`telha.storage.postgres.functions`).
CLOCK = (
    "UPDATE tx_clock SET tx = greatest(tx + 1,"
    " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) WHERE id = 1 RETURNING tx"
)


@lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """``sql`` with its ``?`` placeholders numbered ``$1``, ``$2``… in order (the SQL of
    :mod:`telha.storage.core` has no ``?`` inside literals)."""
    parts = sql.split("?")
    out = [parts[0]]
    for i, part in enumerate(parts[1:], start=1):
        out.append(f"${i}{part}")
    return "".join(out)


T = TypeVar("T")

_INSERT_SEARCH = (
    f"INSERT INTO search_spans ({SEARCH_COLS}, body, text, words)"
    f" VALUES ({'?, ' * 9}?::text::tsvector, ?, ?)"
)


def source_lock_key(sid: int, source_id: bytes) -> int:
    """The advisory lock key (a signed bigint) of ``(scope, source)``."""
    digest = hashlib.blake2b(sid.to_bytes(8, "big") + source_id, digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def lock_sources(conn: Conn, sid: int, source_ids: Sequence[bytes]) -> None:
    """Take the transaction-level advisory lock of each ``(scope, source)`` (in key order, so
    two transactions never wait on each other): request-level and submit-time dedup read the
    source's latest version and active jobs under it, so concurrent POSTs of the same bytes to
    different replicas make exactly one version or job. Re-taking a held lock is a no-op."""
    for key in sorted({source_lock_key(sid, s) for s in source_ids}):
        await conn.execute("SELECT pg_advisory_xact_lock($1)", key)


def _rowcount(status: str) -> int:
    """Rows a command changed, from its status tag (``UPDATE 3``, ``INSERT 0 1``)."""
    last = status.rpartition(" ")[2]
    return int(last) if last.isdigit() else 0


class PgTx:
    """One PostgreSQL transaction (or, for reads, one autocommit connection).

    :param conn: a pooled connection, inside ``conn.transaction()`` for writes.
    :param scopes: the store's committed scope ids (read; new ones go to :attr:`new_scopes`
        and are cached by the runner after the commit).
    """

    dialect: Dialect = POSTGRES
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    #: Set by the engine from ``[search] enabled`` (see :attr:`telha.storage.core.tx.Tx.search`).
    search = True

    def __init__(self, conn: Conn, scopes: dict[Scope, int]) -> None:
        self.conn = conn
        self._scopes = scopes
        self.new_scopes: dict[Scope, int] = {}
        #: Jobs this transaction appended events to (:meth:`wrote_event`).
        self.event_jobs: set[bytes] = set()

    async def execute(self, sql: str, *params: Any) -> int:
        """See :meth:`telha.storage.core.tx.Tx.execute`."""
        return _rowcount(await self.conn.execute(numbered(sql), *params))

    async def fetchone(self, sql: str, *params: Any) -> tuple[Any, ...] | None:
        """See :meth:`telha.storage.core.tx.Tx.fetchone`."""
        row = await self.conn.fetchrow(numbered(sql), *params)
        return tuple(row) if row is not None else None

    async def fetchall(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """See :meth:`telha.storage.core.tx.Tx.fetchall`."""
        return [tuple(r) for r in await self.conn.fetch(numbered(sql), *params)]

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """See :meth:`telha.storage.core.tx.Tx.executemany`."""
        if rows:
            await self.conn.executemany(numbered(sql), rows)

    async def known_scope_id(self, scope: Scope) -> int | None:
        """See :meth:`telha.storage.core.tx.Tx.known_scope_id`."""
        cached = self._scopes.get(scope) or self.new_scopes.get(scope)
        if cached is not None:
            return cached
        found = await self.conn.fetchval(
            "SELECT scope_id FROM scopes WHERE tenant_id = $1 AND organization_id = $2",
            scope.tenant_id,
            scope.organization_id,
        )
        if found is None:
            return None
        self.new_scopes[scope] = int(found)
        return int(found)

    async def scope_id(self, scope: Scope) -> int:
        """The id of ``scope``, interned on this connection if new (another transaction
        interning it at the same moment is waited for on the unique index)."""
        known = await self.known_scope_id(scope)
        if known is not None:
            return known
        params = (scope.tenant_id, scope.organization_id)
        await self.conn.execute(
            "INSERT INTO scopes (tenant_id, organization_id) VALUES ($1, $2)"
            " ON CONFLICT DO NOTHING",
            *params,
        )
        found = await self.known_scope_id(scope)
        assert found is not None
        return found

    async def next_tx(self) -> int:
        """See :meth:`telha.storage.core.tx.Tx.next_tx` (the clock row, locked to the
        commit)."""
        return int(await self.conn.fetchval(CLOCK))

    async def rows_at_next_tx(self, build: Callable[[int], VersionRows]) -> VersionRows:
        """The rows built first, at :data:`~telha.domain.rows.PENDING_TX`, then moved to the
        time taken: the clock row is locked from :meth:`next_tx` to the commit (see
        :meth:`telha.storage.core.tx.Tx.rows_at_next_tx`)."""
        pending = build(PENDING_TX)
        return at_tx(pending, await self.next_tx())

    async def lock_sources(self, sid: int, source_ids: Sequence[bytes]) -> None:
        """See :func:`lock_sources`."""
        await lock_sources(self.conn, sid, source_ids)

    async def notify(self, fmt: str) -> None:
        """``NOTIFY`` :data:`CHANNEL` with ``fmt``, delivered when the transaction commits."""
        await self.conn.execute("SELECT pg_notify($1, $2)", CHANNEL, fmt)

    @staticmethod
    def head_known(sid: int, fmt: str) -> bool:
        """See :meth:`telha.storage.core.tx.Tx.head_known`: never (read the row)."""
        return False

    @staticmethod
    def head_noted(sid: int, fmt: str) -> None:
        """See :meth:`telha.storage.core.tx.Tx.head_noted`: nothing remembered."""

    def wrote_event(self, job_id: bytes) -> None:
        """See :meth:`telha.storage.core.tx.Tx.wrote_event`."""
        self.event_jobs.add(job_id)

    async def write_rows(self, rows: VersionRows) -> None:
        """See :func:`telha.storage.postgres.rows.insert_rows` (one statement)."""
        await insert_rows(self.conn, rows)

    async def write_search_rows(self, sid: int, rows: Sequence[tuple[Any, ...]]) -> None:
        """See :meth:`telha.storage.core.tx.Tx.write_search_rows`: the rows as they are
        (the index is a column of each: no rowid range, no external table)."""
        await self.executemany(_INSERT_SEARCH, rows)

    @staticmethod
    async def compute(size: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread when ``size`` is large
        (:func:`telha.offload.off_loop`): an operation runs on the event loop here."""
        return await off_loop(size, fn, *args)

    @staticmethod
    def driver_failed(exc: BaseException) -> bool:
        """See :meth:`telha.storage.core.tx.Tx.driver_failed`: a driver error but a data
        error (``22xxx``: a stored value that does not convert, e.g. invalid UTF-8)."""
        return isinstance(exc, DRIVER_ERRORS) and not isinstance(exc, asyncpg.DataError)


class PgSnapshotTx(PgTx):
    """A :class:`~telha.storage.core.tx.SnapshotTx`: a pooled connection inside one
    ``READ ONLY``, ``REPEATABLE READ`` transaction; pages come from a server-side cursor."""

    async def pages(
        self, sql: str, page: int, *params: Any
    ) -> AsyncIterator[list[tuple[Any, ...]]]:
        """See :meth:`telha.storage.core.tx.SnapshotTx.pages`."""
        cur = await self.conn.cursor(numbered(sql), *params)
        while rows := await cur.fetch(page):
            yield [tuple(r) for r in rows]
