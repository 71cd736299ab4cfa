"""Migration 7 on a store written before it (both engines): the ``sources`` table is
backfilled from each source's latest published version and its last job, and every job gets
its name (from its payload) and its parent (from its ``enqueued`` event). The store is built
with migrations 1–6 and raw rows shaped as the old code wrote them."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
import pytest

from telha.storage.core.migrations import has_statements
from telha.storage.postgres.migrate import apply_migrations as pg_migrate
from telha.storage.postgres.migrate import migrations as pg_migrations
from telha.storage.sqlite.migrate import apply_migrations as sqlite_migrate
from telha.storage.sqlite.migrate import migrations as sqlite_migrations
from tests.support.pg import ENGINES, create_database, require_engine

pytestmark = pytest.mark.anyio

H = b"\x01" * 32
MAIL, DOC, ATTACHMENT, ERASED = (uuid.uuid4().bytes for _ in range(4))
PARENT, CHILD, LATER, ERASER = (uuid.uuid4() for _ in range(4))
# (scope, source, tx, name, format, hash, canonical, size, published, retired, erased)
VERSIONS = [
    (1, MAIL, 100, "m.eml", "eml", H, H, 1, 100, None, None),
    (1, DOC, 200, "d.txt", "text", H, H, 1, 200, None, None),
    (1, DOC, 300, "d.txt", "markdown", H, H, 1, 300, 350, None),  # retired at 350
    (1, DOC, 400, "d.txt", "markdown", H, None, 1, None, None, None),  # a stream never published
    (1, ERASED, 500, "e.csv", "csv", H, H, 1, 500, None, 900),
]
# (job, scope, kind, format, source, payload, state, created)
JOBS = [
    (PARENT.bytes, 1, "ingest:eml", "eml", MAIL, b'{"name":"m.eml"}', "completed", 90),
    (CHILD.bytes, 1, "ingest:text", "text", ATTACHMENT, b'{"name":"m.eml/a.txt"}', "dead", 101),
    (LATER.bytes, 1, "ingest:text", "text", DOC, b'{"name":"d.txt"}', "pending", 600),
    (ERASER.bytes, 1, "erase", "erase", ERASED, b'{"source_id":"x"}', "completed", 800),
]
EVENTS = [
    (PARENT.bytes, 1, 90, "enqueued", None),
    (CHILD.bytes, 1, 101, "enqueued", f"parent={PARENT}"),
    (LATER.bytes, 1, 600, "enqueued", None),
    (ERASER.bytes, 1, 800, "enqueued", None),
]
INSERTS: dict[str, tuple[str, list[tuple[Any, ...]]]] = {
    "source_versions": (
        "scope_id, source_id, tx, name, format, content_hash, canonical_text_hash, size,"
        " published_tx, retired_tx, erased_at",
        VERSIONS,
    ),
    "jobs": (
        "job_id, scope_id, kind, format, source_id, payload, state, created_at, available_at,"
        " updated_at",
        [(*j, j[-1], j[-1]) for j in JOBS],
    ),
    "job_events": ("job_id, seq, at, transition, detail", EVENTS),
}
SOURCES_SQL = (
    "SELECT source_id, name, format, state, latest_tx, version_count, last_job_id, changed_at"
    " FROM sources ORDER BY changed_at"
)
JOBS_SQL = "SELECT job_id, name, parent_job_id FROM jobs ORDER BY created_at"


def _expect(sources: list[Any], jobs: list[Any]) -> None:
    rows = [tuple(bytes(v) if isinstance(v, bytes | memoryview) else v for v in s) for s in sources]
    assert rows == [
        (MAIL, "m.eml", "eml", "current", 100, 1, PARENT.bytes, 100),
        (ATTACHMENT, "m.eml/a.txt", "text", "pending", None, 0, CHILD.bytes, 101),
        (DOC, "d.txt", "markdown", "retired", 300, 2, LATER.bytes, 600),
        (ERASED, "e.csv", "csv", "erased", 500, 1, ERASER.bytes, 900),
    ]
    assert [(bytes(j[0]), j[1], bytes(j[2]) if j[2] is not None else None) for j in jobs] == [
        (PARENT.bytes, "m.eml", None),
        (CHILD.bytes, "m.eml/a.txt", PARENT.bytes),
        (LATER.bytes, "d.txt", None),
        (ERASER.bytes, None, None),
    ]


def _listings(migrations: list[tuple[int, str, str]]) -> int:
    """The number of the migration that adds the listings."""
    return next(n for n, name, _ in migrations if name.endswith("_listings.sql"))


def _before_listings(migrations: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The migrations a store had before the listings (the rows below are of that schema)."""
    return [m for m in migrations if m[0] < _listings(migrations)]


@pytest.mark.parametrize("engine", ENGINES)
async def test_the_listings_migration_backfills_sources_and_job_names_and_parents(
    engine: str, tmp_path: Path
) -> None:
    require_engine(engine)
    if engine == "sqlite":
        path = tmp_path / "old.db"
        with sqlite3.connect(path) as db:
            db.execute(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at INTEGER NOT NULL)"
            )
            for number, name, sql in _before_listings(sqlite_migrations()):
                db.executescript(sql)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (number, name))
            for table, (columns, rows) in INSERTS.items():
                marks = ", ".join("?" * len(rows[0]))
                db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
        async with aiosqlite.connect(path) as conn:
            assert (await sqlite_migrate(conn))[0] == _listings(sqlite_migrations())
            _expect(
                list(await conn.execute_fetchall(SOURCES_SQL)),
                list(await conn.execute_fetchall(JOBS_SQL)),
            )
        return
    conn = await asyncpg.connect(create_database())
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at bigint NOT NULL)"
        )
        for number, name, sql in _before_listings(pg_migrations()):
            if has_statements(sql):  # a migration whose functions moved may be comments only
                await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2, 0)", number, name)
        for table, (columns, rows) in INSERTS.items():
            marks = ", ".join(f"${i + 1}" for i in range(len(rows[0])))
            await conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
        assert (await pg_migrate(conn))[0] == _listings(pg_migrations())
        _expect(list(await conn.fetch(SOURCES_SQL)), list(await conn.fetch(JOBS_SQL)))
    finally:
        await conn.close()
