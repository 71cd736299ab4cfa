"""Each engine's schema is the same however a store got there (docs/architecture.md, "Where the
SQL lives"): a store upgraded from any earlier release's schema — functions and triggers as
its migrations shipped them, from ``tests/fixtures/shipped_migrations`` — ends with what a
new store has, and both match the checked-in snapshot (``telha/storage/*/schema.txt``,
``make schema``). On SQLite the oldest supported store is the first release's
(``tests/fixtures/round1``)."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import aiosqlite
import asyncpg
import pytest

from telha.storage.postgres.migrate import apply_migrations as pg_migrate
from telha.storage.postgres.schema import describe as pg_describe
from telha.storage.sqlite.migrate import apply_migrations as sqlite_migrate
from telha.storage.sqlite.schema import describe as sqlite_describe
from tests.support.pg import create_database, require_engine

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STORAGE = Path(__file__).resolve().parents[2] / "telha" / "storage"
#: The schema versions upgraded from on PostgreSQL: the first release's, each one after a
#: migration that changed a function, and the last before functions.sql.
PG_FROM = (5, 6, 8, 15, 19, 26, 28)
#: On SQLite (beside the first release's store, at 5): before and after its triggers came.
SQLITE_FROM = (14, 15, 28)

SQLITE_SCHEMA = "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"  # noqa: E501
PG_SCHEMA = "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)"  # noqa: E501


def _shipped(engine: str) -> list[tuple[int, str, str]]:
    """The migrations of ``engine`` as an earlier release shipped them."""
    data = json.loads(
        gzip.decompress((FIXTURES / "shipped_migrations" / f"{engine}.json.gz").read_bytes())
    )
    return [(int(n), str(name), str(sql)) for n, name, sql in data]


def _snapshot(engine: str) -> str:
    return (STORAGE / engine / "schema.txt").read_text(encoding="utf-8")


async def _sqlite_schema(path: Path) -> str:
    """Migrate the store at ``path`` with this build, then describe it."""
    async with aiosqlite.connect(path) as conn:
        await sqlite_migrate(conn)
    with sqlite3.connect(path) as db:
        return sqlite_describe(db)


async def test_sqlite_upgraded_stores_match_a_new_one_and_the_snapshot(tmp_path: Path) -> None:
    fresh = await _sqlite_schema(tmp_path / "fresh.db")
    assert fresh == _snapshot("sqlite"), "schema.txt is stale: run `make schema`"
    assert "trigger blob_chunks_usage_ins" in fresh
    shutil.copy(FIXTURES / "round1" / "round1.db", tmp_path / "round1.db")
    assert await _sqlite_schema(tmp_path / "round1.db") == fresh
    shipped = _shipped("sqlite")
    for upto in SQLITE_FROM:
        path = tmp_path / f"at{upto}.db"
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA synchronous = OFF")
            db.execute(SQLITE_SCHEMA)
            for number, name, sql in shipped:
                if number <= upto:
                    db.executescript(sql)
                    db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (number, name))
        assert await _sqlite_schema(path) == fresh, f"upgraded from schema version {upto}"


async def _pg_schema(dsn: str, shipped: list[tuple[int, str, str]], upto: int) -> str:
    """A store at schema version ``upto`` as ``shipped`` left it, migrated by this build."""
    conn = await asyncpg.connect(dsn)
    try:
        if upto:
            await conn.execute(PG_SCHEMA)
        for number, name, sql in shipped:
            if number <= upto:
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2, 0)", number, name)
        await pg_migrate(conn)
        return await pg_describe(conn)
    finally:
        await conn.close()


async def test_postgres_upgraded_stores_match_a_new_one_and_the_snapshot() -> None:
    require_engine("postgres")
    shipped = _shipped("postgres")
    dsn = create_database()
    fresh = await _pg_schema(dsn, shipped, 0)
    assert fresh == _snapshot("postgres"), "schema.txt is stale: run `make schema`"
    assert "function telha_enqueue(" in fresh and "CREATE TRIGGER blob_chunks_usage" in fresh
    conn = await asyncpg.connect(dsn)
    try:  # functions.sql runs on every migrate: again, nothing changes
        assert await pg_migrate(conn) == []
        assert await pg_describe(conn) == fresh
    finally:
        await conn.close()
    for upto in PG_FROM:
        assert await _pg_schema(create_database(), shipped, upto) == fresh, (
            f"upgraded from schema version {upto}"
        )
