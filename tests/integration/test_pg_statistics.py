"""The first ``ANALYZE`` of a new PostgreSQL database's tables
(:mod:`telha.storage.postgres.statistics`): a table that was never analyzed is analyzed
once it has changed enough, by the function and by the store's actor, and never again by
them (autovacuum keeps it current from then on)."""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from telha.domain.model import Scope
from telha.storage.postgres import PostgresStore
from telha.storage.postgres.statistics import MIN_CHANGES, FirstAnalyze, analyze_new_tables
from tests.support.pg import create_database, require_engine
from tests.support.wait import until

pytestmark = pytest.mark.anyio


async def _reltuples(conn: asyncpg.Connection, table: str) -> float:
    return float(
        await conn.fetchval("SELECT reltuples FROM pg_class WHERE oid = $1::regclass", table)
    )


async def _analyzes(conn: asyncpg.Connection, table: str) -> bool:
    return table in await analyze_new_tables(conn)


async def _changes(conn: asyncpg.Connection, table: str, count: int) -> bool:
    """The cumulative statistics show ``count`` row changes of ``table`` since its last
    ``ANALYZE``."""
    changes = await conn.fetchval(
        "SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relid = $1::regclass", table
    )
    return bool(changes == count)


async def _analyzed(conn: asyncpg.Connection, table: str) -> bool:
    return await _reltuples(conn, table) >= 0


async def _add_keys(dsn: str, count: int, first: int = 0) -> None:
    """Insert ``count`` API keys through a store, then close it.

    A backend reports its row counts to the cumulative statistics when it goes idle, but
    at most once a second, then waits 10 s idle (up to 60 s when the report meets a lock):
    closing the pool ends the backends, and a backend that exits reports at once.
    """
    async with PostgresStore(dsn, pool_size=2) as store:
        for i in range(first, first + count):
            await store.keys.add(Scope("t", "o"), f"key-{i}", i.to_bytes(32, "big"))


async def _without_autovacuum(conn: asyncpg.Connection) -> None:
    """Keep autovacuum off ``api_keys``: its own ``ANALYZE`` would race the one tested."""
    await conn.execute("ALTER TABLE api_keys SET (autovacuum_enabled = false)")


async def test_a_table_is_analyzed_once_it_changed_enough() -> None:
    require_engine("postgres")
    dsn = create_database()
    async with PostgresStore(dsn, pool_size=2):
        pass  # migrated
    conn = await asyncpg.connect(dsn)
    try:
        await _without_autovacuum(conn)
        assert await _reltuples(conn, "api_keys") < 0  # never analyzed
        await _add_keys(dsn, 10)
        await until(lambda: _changes(conn, "api_keys", 10), every_s=0.1)
        assert "public.api_keys" not in await analyze_new_tables(conn)
        assert await _reltuples(conn, "api_keys") < 0  # too few changes to bother
        await _add_keys(dsn, MIN_CHANGES, first=10)
        await until(lambda: _analyzes(conn, "public.api_keys"), every_s=0.1)
        assert await _reltuples(conn, "api_keys") == MIN_CHANGES + 10
        assert "public.api_keys" not in await analyze_new_tables(conn)  # once only
    finally:
        await conn.close()


async def test_the_store_actor_analyzes_new_tables() -> None:
    require_engine("postgres")
    dsn = create_database()
    async with PostgresStore(dsn, pool_size=2):
        pass  # migrated
    conn = await asyncpg.connect(dsn)
    try:
        await _without_autovacuum(conn)
        await _add_keys(dsn, MIN_CHANGES)
        async with PostgresStore(dsn, pool_size=2) as store, anyio.create_task_group() as tg:
            await tg.start(FirstAnalyze(store._require_pool(), check_s=0.2).run)
            await until(lambda: _analyzed(conn, "api_keys"), every_s=0.2)
            tg.cancel_scope.cancel()
        assert await _reltuples(conn, "api_keys") == MIN_CHANGES
    finally:
        await conn.close()
