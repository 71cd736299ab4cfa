"""SQLite migration 20 on a store whose full-text index was written before it: the FTS5 table
indexes ``body`` alone (a scope is a rowid range now, docs/architecture.md, "Search"), the
rows of the old numbering are gone with their waiting work, and ``search_state`` says the
index is not built, so the next start with ``[search] enabled`` queues every current version
(``test_search_index.py``'s disabled-then-enabled test covers that start)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from telha.storage.sqlite.migrate import apply_migrations, migrations

pytestmark = pytest.mark.anyio

OLD_ROW = (1, b"s" * 16, 5, 0, 5, "body", b"n" * 16, " PARAGRAPH ", "text", "alpha")


def _number() -> int:
    return next(n for n, name, _ in migrations() if name.endswith("_search_scope_rowids.sql"))


async def test_the_rowid_migration_rebuilds_the_index_from_the_current_versions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at INTEGER NOT NULL)"
        )
        for number, name, sql in migrations():
            if number < _number():
                db.executescript(sql)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (number, name))
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
