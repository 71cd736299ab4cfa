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


async def _analyzed(conn: asyncpg.Connection, table: str) -> bool:
    return await _reltuples(conn, table) >= 0


async def _add_keys(store: PostgresStore, count: int, first: int = 0) -> None:
    for i in range(first, first + count):
        await store.insert_api_key(Scope("t", "o"), f"key-{i}", i.to_bytes(32, "big"))


async def test_a_table_is_analyzed_once_it_changed_enough() -> None:
    require_engine("postgres")
    dsn = create_database()
    async with PostgresStore(dsn, pool_size=2) as store:
        conn = await asyncpg.connect(dsn)
        try:
            assert await _reltuples(conn, "api_keys") < 0  # never analyzed
            await _add_keys(store, 10)
            assert "public.api_keys" not in await analyze_new_tables(conn)
            assert await _reltuples(conn, "api_keys") < 0  # too few changes to bother
            await _add_keys(store, MIN_CHANGES, first=10)
            # The cumulative statistics reach the catalog view within a second or so.
            await until(lambda: _analyzes(conn, "public.api_keys"), every_s=0.2)
            assert await _reltuples(conn, "api_keys") == MIN_CHANGES + 10
            assert "public.api_keys" not in await analyze_new_tables(conn)  # once only
        finally:
            await conn.close()


async def test_the_store_actor_analyzes_new_tables() -> None:
    require_engine("postgres")
    dsn = create_database()
    async with PostgresStore(dsn, pool_size=2) as store:
        await _add_keys(store, MIN_CHANGES)
        conn = await asyncpg.connect(dsn)
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(FirstAnalyze(store._require_pool(), check_s=0.2).run)
                await until(lambda: _analyzed(conn, "api_keys"), every_s=0.2)
                tg.cancel_scope.cancel()
            assert await _reltuples(conn, "api_keys") == MIN_CHANGES
        finally:
            await conn.close()
