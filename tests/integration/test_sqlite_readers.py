"""SQLite's read connections map the database file (``[storage] reader_mmap_mib``,
docs/operations.md): every reader of the pool, never the writer, and ``0`` maps nothing. On
real SQLite files, through :func:`telha.storage.open_store` as ``telha serve`` opens them."""

from __future__ import annotations

from pathlib import Path

import pytest

from telha.config import load_config
from telha.storage import open_store
from telha.storage.core.tx import Tx
from telha.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


async def _mapped(tx: Tx) -> int:
    row = await tx.fetchone("PRAGMA mmap_size")
    assert row is not None
    return int(row[0])


async def _readers_mapped(store: SqliteStore, readers: int) -> list[int]:
    """``PRAGMA mmap_size`` of every reader: each read is handed the next pooled one."""
    return [await store.read(_mapped) for _ in range(readers * 2)]


async def _writer_mapped(store: SqliteStore) -> int:
    return await store.transaction("read mmap_size", _mapped)


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("", 2047 * MIB), ("reader_mmap_mib = 64", 64 * MIB), ("reader_mmap_mib = 0", 0)],
)
async def test_every_reader_maps_what_the_config_says_and_the_writer_nothing(
    tmp_path: Path, setting: str, expected: int
) -> None:
    path = tmp_path / "telha.toml"
    path.write_text(f'[storage]\npath = "t.db"\nreaders = 3\n{setting}\n', encoding="utf-8")
    cfg, base = load_config(path, environ={})
    async with open_store(cfg, base) as store:
        assert isinstance(store, SqliteStore)
        assert await _readers_mapped(store, 3) == [expected] * 6
        assert await _writer_mapped(store) == 0
