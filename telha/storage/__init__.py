"""Storage: the domain-level Protocol and its engines (SQLite by default, PostgreSQL for
several replicas). :func:`open_store` is the one place an engine is chosen; nothing outside
this package names an engine.
"""

from __future__ import annotations

from pathlib import Path

from telha.config import Config
from telha.storage.protocol import Storage, StorageEngine

__all__ = ["Storage", "StorageEngine", "open_store"]


def open_store(
    cfg: Config,
    base_dir: Path,
    *,
    readers: int | None = None,
    pool_size: int | None = None,
    readonly: bool = False,
) -> StorageEngine:
    """The engine ``[storage]`` names, not yet opened (run it as an actor, or use it as an
    async context manager).

    :param cfg: the whole config (``[storage]`` and the data folder's path).
    :param base_dir: the folder relative SQLite paths resolve against.
    :param readers: SQLite read pool size (default ``storage.readers``); short-lived tools
        pass 1.
    :param pool_size: PostgreSQL pool size (default ``storage.pool_size``).
    :param readonly: open for reading only (``telha check``): no migrations, no writes
        (SQLite: ``mode=ro`` connections alone, so it can run beside a live server;
        PostgreSQL: read-only sessions). The schema must be current.
    """
    storage = cfg.storage
    if storage.engine == "postgres":
        from telha.storage.postgres import PostgresStore

        pg = PostgresStore(
            storage.dsn,
            pool_size=pool_size or storage.pool_size,
            readonly=readonly,
            search=cfg.search.enabled,
        )
        pg.search.catch_up_s = cfg.search.catch_up_ms / 1000
        return pg
    from telha.storage.sqlite import SqliteStore

    lite = SqliteStore(
        cfg.storage_path(base_dir),
        synchronous=storage.synchronous,
        readers=readers or storage.readers,
        reader_mmap_mib=storage.reader_mmap_mib,
        readonly=readonly,
        search=cfg.search.enabled,
    )
    lite.search.catch_up_s = cfg.search.catch_up_ms / 1000
    return lite
