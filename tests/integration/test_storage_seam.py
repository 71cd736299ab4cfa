"""The storage seam (docs/architecture.md, "The storage seam") on both engines: an operation
that rolls back leaves nothing behind, not even in the engine's caches; a store opened
read-only must already have this build's schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import blake3
import pytest

from telha.config import Config, StorageConfig
from telha.domain.errors import StorageError
from telha.domain.model import Scope
from telha.storage import StorageEngine, open_store
from telha.storage.core.tx import Rollback, Tx
from telha.storage.postgres.migrate import migrations as pg_migrations
from telha.storage.sqlite.migrate import migrations as lite
from tests.support.pg import ENGINES, create_database, require_engine

pytestmark = pytest.mark.anyio


async def _intern_then_roll_back(tx: Tx, scope: Scope) -> int:
    sid = await tx.scope_id(scope)
    raise Rollback(sid)


async def _read_scope(tx: Tx, scope: Scope) -> int | None:
    return await tx.known_scope_id(scope)


async def test_a_rolled_back_scope_is_never_cached(store: StorageEngine) -> None:
    scope = Scope("seam-tenant", "org")
    engine = store  # the runners are the engine's own: exercise them directly
    interned = await engine.transaction("intern", _intern_then_roll_back, scope)  # type: ignore[attr-defined]
    assert isinstance(interned, int)
    assert await engine.read(_read_scope, scope) is None  # type: ignore[attr-defined]
    # The next write interns the scope for real and uses its committed id.
    key = blake3.blake3(b"seam key").digest()
    await store.keys.add(scope, "seam-key", key)
    assert await store.keys.scope_for(key) == scope
    assert await engine.read(_read_scope, scope) is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", ENGINES)
async def test_read_only_open_refuses_an_older_schema(engine: str, tmp_path: Path) -> None:
    """``telha check`` opens read-only and applies no migration: a store whose schema is
    older than this build's is refused by name, and an empty one is no Telha store."""
    engine = require_engine(engine)
    if engine == "postgres":
        storage = StorageConfig(engine="postgres", dsn=create_database(), pool_size=2)
        empty = StorageConfig(engine="postgres", dsn=create_database(), pool_size=2)
    else:
        storage = StorageConfig(path=str(tmp_path / "old.db"), readers=1)
        (tmp_path / "empty.db").write_bytes(b"")
        empty = StorageConfig(path=str(tmp_path / "empty.db"), readers=1)
    async with open_store(Config(storage=storage), tmp_path):
        pass  # migrated to this build's schema
    # Numbers may have gaps (migrations of parallel branches land in number order).
    numbers = sorted(n for n, _, _ in (pg_migrations() if engine == "postgres" else lite()))
    newest, previous = numbers[-1], numbers[-2]
    if engine == "postgres":
        conn = await asyncpg.connect(storage.dsn)
        await conn.execute("DELETE FROM schema_migrations WHERE version = $1", newest)
        await conn.close()
    else:
        with sqlite3.connect(storage.path) as conn:
            conn.execute("DELETE FROM schema_migrations WHERE version = ?", (newest,))
    with pytest.raises(StorageError, match=f"schema version {previous}, this build needs"):
        async with open_store(Config(storage=storage), tmp_path, readonly=True):
            pass
    with pytest.raises(StorageError, match=r"no Telha schema|not a Telha database"):
        async with open_store(Config(storage=empty), tmp_path, readonly=True):
            pass
