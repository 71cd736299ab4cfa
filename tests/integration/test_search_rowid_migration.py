"""SQLite migrations 20 and 33 on a store whose full-text index was written before them: the
FTS5 table indexes ``body`` alone (a scope is a rowid range now, docs/architecture.md,
"Search"), then a scope's rows are numbered newest lowest; each time the rows of the old
numbering are gone with their waiting work, and ``search_state`` says the index is not
built, so the next start with ``[search] enabled`` queues every current version
(``test_search_index.py``'s disabled-then-enabled test covers that start)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from telha.storage.sqlite.migrate import apply_migrations, migrations

pytestmark = pytest.mark.anyio

OLD_ROW = (1, b"s" * 16, 5, 0, 5, "body", b"n" * 16, " PARAGRAPH ", "text", "alpha")


def _number(suffix: str = "_search_scope_rowids.sql") -> int:
    return next(n for n, name, _ in migrations() if name.endswith(suffix))


def _before(path: Path, number: int) -> sqlite3.Connection:
    """A database at ``path`` with every migration below ``number`` applied (its
    ``schema_migrations`` says so), as a store of that release left it."""
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at INTEGER NOT NULL)"
    )
    for n, name, sql in migrations():
        if n < number:
            db.executescript(sql)
            db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (n, name))
    return db


async def test_the_rowid_migration_rebuilds_the_index_from_the_current_versions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with _before(path, _number()) as db:
        cols = 'scope_id, source_id, version_tx, start, "end", kind, linked_nodes, labels, format'
        db.execute(f"INSERT INTO search_spans ({cols}, body) VALUES ({'?, ' * 9}?)", OLD_ROW)
        db.execute("INSERT INTO search_fts (rowid, scope_id, body) VALUES (1, '1', 'alpha')")
        db.execute("INSERT INTO search_sources VALUES (1, ?, 5, 0, 5, 1)", (b"s" * 16,))
        db.execute("UPDATE search_state SET enabled = 1")
        assert db.execute("SELECT rowid FROM search_fts WHERE search_fts MATCH 'alpha'").fetchall()
    async with aiosqlite.connect(path) as conn:
        assert _number() in await apply_migrations(conn)
        cursor = await conn.execute("SELECT * FROM search_fts LIMIT 0")
        assert [d[0] for d in cursor.description] == ["body"]
        for table in ("search_spans", "search_sources", "search_stale"):
            assert await conn.execute_fetchall(f"SELECT * FROM {table}") == []
        assert await conn.execute_fetchall("SELECT enabled FROM search_state") == [(0,)]
        found = "SELECT rowid FROM search_fts WHERE search_fts MATCH 'alpha'"
        assert await conn.execute_fetchall(found) == []


async def test_the_newest_lowest_migration_empties_both_indexes(tmp_path: Path) -> None:
    """A store at 32 whose scope's rows were numbered from the range's low end up (oldest
    lowest): migration 33 empties the word and substring indexes and their rows, and says
    the index is not built."""
    number = _number("_search_newest_lowest.sql")
    path = tmp_path / "old.db"
    with _before(path, number) as db:
        cols = 'scope_id, source_id, version_tx, start, "end", kind, linked_nodes, labels, format'
        first = 1 << 40  # scope 1's lowest rowid: the old numbering's first row
        db.execute(
            f"INSERT INTO search_spans (rowid, {cols}, body) VALUES (?, {'?, ' * 9}?)",
            (first, *OLD_ROW),
        )
        for table in ("search_fts", "search_tri"):
            db.execute(f"INSERT INTO {table} (rowid, body) VALUES (?, 'alpha')", (first,))
        db.execute("INSERT INTO search_sources VALUES (1, ?, 5, 0, 5, 1, NULL)", (b"s" * 16,))
        db.execute("UPDATE search_state SET enabled = 1")
    async with aiosqlite.connect(path) as conn:
        assert number in await apply_migrations(conn)
        for table in ("search_spans", "search_sources", "search_stale"):
            assert await conn.execute_fetchall(f"SELECT * FROM {table}") == []
        assert await conn.execute_fetchall("SELECT enabled FROM search_state") == [(0,)]
        for table, q in (("search_fts", "alpha"), ("search_tri", "alp")):
            found = f"SELECT rowid FROM {table} WHERE {table} MATCH '{q}'"
            assert await conn.execute_fetchall(found) == [], table
