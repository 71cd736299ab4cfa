"""Numbered SQL migrations of the PostgreSQL engine (``migrations/NNNN_name.sql``), applied in
order when a store opens, then its functions and triggers (``functions.sql``), every time.

Several replicas may start at once: the migrator holds a session-level advisory lock
(:data:`MIGRATION_LOCK`) while it reads ``schema_migrations`` and applies what is missing, so
exactly one of them applies each migration and the others find it applied. Each migration runs
in its own transaction together with its ``schema_migrations`` row; ``functions.sql`` runs in
one more, after the last (its statements are ``CREATE OR REPLACE``).
"""

from __future__ import annotations

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from telha.domain.ids import now_us
from telha.storage.core.migrations import has_statements, numbered_migrations
from telha.storage.postgres import functions as function_text

__all__ = ["MIGRATION_LOCK", "apply_migrations", "functions", "migrations"]

#: Advisory lock key (bigint) taken by the migrator: ``int.from_bytes(b"telhamig")``.
MIGRATION_LOCK = int.from_bytes(b"telhamig", "big") & 0x7FFF_FFFF_FFFF_FFFF


def migrations() -> list[tuple[int, str, str]]:
    """All migrations as ``(number, file name, sql)``, ordered by number."""
    return numbered_migrations("telha.storage.postgres")


def functions() -> str:
    """The engine's functions and triggers (``functions.sql``, its statements shared with the
    general path filled in: :func:`telha.storage.postgres.functions.functions`)."""
    return function_text.functions()


async def apply_migrations(
    conn: asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record],
) -> list[int]:
    """Apply every migration newer than the database's, then ``functions.sql``, under the
    migration lock.

    :param conn: a connection outside any transaction (the lock is session-level).
    :returns: the numbers applied now (empty when the schema was current).
    :raises asyncpg.PostgresError: a migration or ``functions.sql`` failed (it is rolled back;
        the lock released).
    """
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations"
            " (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)"
        )
        current = await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")
        applied = []
        for number, name, sql in migrations():
            if number <= int(current):
                continue
            async with conn.transaction():
                if has_statements(sql):
                    await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations VALUES ($1, $2, $3)", number, name, now_us()
                )
            applied.append(number)
        async with conn.transaction():
            await conn.execute(functions())
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)
