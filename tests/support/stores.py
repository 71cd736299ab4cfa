"""A fresh store of either engine, opened in-process (storage-level tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from telha.config import Config, SearchConfig, StorageConfig
from telha.storage import StorageEngine, open_store
from telha.storage.postgres.store import PostgresStore
from tests.support.pg import create_database, require_engine

__all__ = ["engine_of", "fresh_store"]


def engine_of(store: StorageEngine) -> str:
    """``"postgres"`` or ``"sqlite"``: the engine of an open ``store``."""
    return "postgres" if isinstance(store, PostgresStore) else "sqlite"


@asynccontextmanager
async def fresh_store(
    engine: str, folder: Path, *, search: bool = False
) -> AsyncIterator[StorageEngine]:
    """A new, empty, migrated store of ``engine`` (``"sqlite"``: a file in ``folder``;
    ``"postgres"``: a fresh database on the test cluster), open for the block; ``search``
    keeps the full-text index (``[search] enabled``)."""
    if require_engine(engine) == "postgres":
        storage = StorageConfig(engine="postgres", dsn=create_database(), pool_size=4)
    else:
        storage = StorageConfig(path=str(folder / "store.db"), readers=2)
    config = Config(storage=storage, search=SearchConfig(enabled=search))
    async with open_store(config, folder) as opened:
        yield opened
