"""Write each engine's schema snapshot (``telha/storage/{sqlite,postgres}/schema.txt``): the
schema of a database freshly migrated by this checkout, as ``describe`` normalizes it.

``python scripts/schema_snapshot.py`` (``make schema``) after adding a migration or editing
``functions.sql``; PostgreSQL needs ``TELHA_TEST_PG_DSN`` (a database it may create databases
from) or the cluster of ``scripts/pg-test-server``. ``--check`` writes nothing and exits 1
when a snapshot differs. ``tests/integration/test_schema_snapshot.py`` fails while a snapshot
is stale.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path

import aiosqlite
import anyio
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telha.storage.postgres.migrate import apply_migrations as pg_migrate
from telha.storage.postgres.schema import describe as pg_describe
from telha.storage.sqlite.migrate import apply_migrations as sqlite_migrate
from telha.storage.sqlite.schema import describe as sqlite_describe
from tests.support.pg import create_database, drop_databases

ROOT = Path(__file__).resolve().parents[1] / "telha" / "storage"


async def fresh_sqlite() -> str:
    """The schema of a new SQLite store."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fresh.db"
        async with aiosqlite.connect(path) as conn:
            await sqlite_migrate(conn)
        with sqlite3.connect(path) as db:
            return sqlite_describe(db)


async def fresh_postgres() -> str:
    """The schema of a new PostgreSQL store (in a database made for it, then dropped)."""
    conn = await asyncpg.connect(create_database())
    try:
        await pg_migrate(conn)
        return await pg_describe(conn)
    finally:
        await conn.close()


async def main(check: bool) -> int:
    stale = 0
    try:
        for engine, text in (
            ("sqlite", await fresh_sqlite()),
            ("postgres", await fresh_postgres()),
        ):
            path = ROOT / engine / "schema.txt"
            old = path.read_text(encoding="utf-8") if path.exists() else ""
            if old == text:
                continue
            stale += 1
            sys.stdout.write(f"{path}: {'stale' if check else 'written'}\n")
            if not check:
                path.write_text(text, encoding="utf-8")
    finally:
        drop_databases()
    return 1 if check and stale else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    sys.exit(anyio.run(main, parser.parse_args().check))
