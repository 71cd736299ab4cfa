"""Numbered SQL migrations (``migrations/NNNN_name.sql``), applied in order at start, then the
engine's triggers (``functions.sql``), every time."""

from __future__ import annotations

import aiosqlite

from telha.domain.ids import now_us
from telha.storage.core.migrations import fill, functions_sql, numbered_migrations
from telha.storage.quotas.limits import ADD_USAGE

__all__ = ["apply_migrations", "functions", "migrations"]


def migrations() -> list[tuple[int, str, str]]:
    """All migrations as ``(number, file name, sql)``, ordered by number."""
    return numbered_migrations("telha.storage.sqlite")


def functions() -> str:
    """The engine's triggers (``functions.sql``), each chunk trigger adding its difference
    to ``scope_usage`` with :data:`telha.storage.quotas.limits.ADD_USAGE` (one writer: shard
    0)."""
    return functions_sql(
        "telha.storage.sqlite",
        {
            "usage_insert": fill(ADD_USAGE, "NEW.scope_id", "0", "length(NEW.data)"),
            "usage_update": fill(
                ADD_USAGE, "NEW.scope_id", "0", "length(NEW.data) - length(OLD.data)"
            ),
            "usage_delete": fill(ADD_USAGE, "OLD.scope_id", "0", "-length(OLD.data)"),
        },
    )


async def _current(conn: aiosqlite.Connection) -> int:
    async with conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def apply_migrations(conn: aiosqlite.Connection) -> list[int]:
    """Apply every migration newer than the database's, each in its own transaction, then
    ``functions.sql`` in one more.

    :returns: the numbers applied now (empty when the schema was current).
    """
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations"
        " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    await conn.commit()
    current = await _current(conn)
    applied = []
    for number, name, sql in migrations():
        if number <= current:
            continue
        script = (
            "BEGIN IMMEDIATE;\n"
            f"{sql}\n"
            f"INSERT INTO schema_migrations VALUES ({number}, '{name}', {now_us()});\n"
            "COMMIT;"
        )
        try:
            await conn.executescript(script)
        except Exception:
            if conn.in_transaction:
                await conn.rollback()
            # Another process (say `telha api-key create` beside `telha serve`) may have
            # applied it first; only a migration still missing is an error.
            if await _current(conn) >= number:
                continue
            raise
        applied.append(number)
    try:
        await conn.executescript(f"BEGIN IMMEDIATE;\n{functions()}\nCOMMIT;")
    except Exception:
        if conn.in_transaction:
            await conn.rollback()
        raise
    return applied
