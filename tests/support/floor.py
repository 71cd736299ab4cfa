"""Baselines for benchmarks: a plain ``sqlite3`` connection on a fresh file migrated to
Telha's schema, with the pragmas the store uses (WAL, synchronous=NORMAL)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio

from telha.storage.sqlite import SqliteStore

__all__ = ["floor_db"]


def floor_db(path: Path) -> sqlite3.Connection:
    """A connection (autocommit; callers BEGIN/COMMIT) on ``path`` after Telha's migrations."""

    async def migrate() -> None:
        async with SqliteStore(path, readers=1):
            pass

    anyio.run(migrate)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn
