"""PostgreSQL's substring index needs the ``pg_trgm`` extension (docs/operations.md,
"Running on PostgreSQL"): a role that may create tables but not extensions in its database
is stopped by migration 0032 with an error that says so and how to fix it — no store runs
without the index — and once an administrator created the extension, the same role
migrates."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from telha.storage.postgres.migrate import apply_migrations
from tests.support.pg import create_database, require_engine

pytestmark = pytest.mark.anyio


def _as(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))


async def test_a_role_that_may_not_create_pg_trgm_is_told_what_to_run() -> None:
    require_engine("postgres")
    dsn = create_database()
    role = f"telha_noext_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(dsn)
    try:
        # The role may create tables in the schema, not extensions in the database.
        await admin.execute(f"CREATE ROLE {role} LOGIN")
        await admin.execute(f"ALTER SCHEMA public OWNER TO {role}")
        conn = await asyncpg.connect(_as(dsn, role))
        try:
            with pytest.raises(asyncpg.PostgresError) as failed:
                await apply_migrations(conn)
            assert "needs the pg_trgm extension" in str(failed.value)
            assert "CREATE EXTENSION pg_trgm" in str(failed.value.as_dict().get("hint"))
            done = await conn.fetchval("SELECT max(version) FROM schema_migrations")
            assert done == 31  # every migration before it, none after
            await admin.execute("CREATE EXTENSION pg_trgm")
            assert 32 in await apply_migrations(conn)
        finally:
            await conn.close()
    finally:
        await admin.execute(f"DROP OWNED BY {role} CASCADE")
        await admin.execute(f"DROP ROLE {role}")
        await admin.close()
