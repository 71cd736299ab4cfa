"""Raw bytes and the check snapshot on the store directly, on both engines: stores of every
chunk-count edge read back whole and from offsets, a store cut short is never read and is
overwritten by the next, blocklisted bytes are refused with nothing written, and a scan sees
the store as of one instant while writes go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from telha.domain.errors import ContentErased, NotFound
from telha.domain.ids import content_hash, new_id
from telha.domain.model import BLOB_CHUNK, Scope
from telha.storage.core.tx import Tx
from telha.storage.postgres import PostgresStore
from telha.storage.raw.chunks import store_chunks
from telha.storage.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
MiB = BLOB_CHUNK


def _bytes(size: int) -> bytes:
    """Bytes whose chunks all differ (251 does not divide a chunk)."""
    return (bytes(range(251)) * (size // 251 + 1))[:size]


async def _read(store: SqliteStore | PostgresStore, digest: bytes, offset: int = 0) -> bytes:
    got: list[bytes] = []
    totals = set()
    async for at, data, total in store.raw.read(SCOPE, digest, offset):
        assert at == offset + sum(len(d) for d in got) and len(data) <= MiB
        got.append(data)
        totals.add(total)
    assert len(totals) <= 1 and totals <= {offset + sum(map(len, got))}
    return b"".join(got)


async def _count(tx: Tx, digest: bytes) -> tuple[int, int]:
    chunks = await tx.fetchone("SELECT count(*) FROM raw_chunks WHERE content_hash = ?", digest)
    blobs = await tx.fetchone("SELECT count(*) FROM raw_blobs WHERE content_hash = ?", digest)
    assert chunks is not None and blobs is not None
    return int(chunks[0]), int(blobs[0])


@pytest.mark.parametrize("size", [0, 1, MiB, 8 * MiB, 8 * MiB + 1])
async def test_stored_bytes_read_back(
    store: SqliteStore | PostgresStore, tmp_path: Path, size: int
) -> None:
    data = _bytes(size)
    path = tmp_path / "upload"
    path.write_bytes(data)
    digest = content_hash(data)
    assert not await store.raw.has(SCOPE, digest)
    await store.raw.put(SCOPE, digest, path, size)
    await store.raw.put(SCOPE, digest, path, size)  # stored already: a no-op
    assert await store.raw.has(SCOPE, digest)
    assert await store.read(_count, digest) == (-(-size // MiB), 1)
    assert await _read(store, digest) == data
    for offset in {0, size // 2, max(size - 1, 0), size}:
        assert await _read(store, digest, offset) == data[offset:]
    with pytest.raises(NotFound):
        await _read(store, digest, size + 1)
    assert not await store.raw.has(Scope("t", "other"), digest)


async def test_a_store_cut_short_is_not_read_and_is_overwritten(
    store: SqliteStore | PostgresStore, tmp_path: Path
) -> None:
    data = _bytes(2 * MiB + 5)
    digest = content_hash(data)
    # The first transaction of a store whose process died before the last one.
    await store.transaction(
        "store raw bytes", store_chunks, SCOPE, digest, len(data), 0, [b"x" * MiB], False
    )
    assert not await store.raw.has(SCOPE, digest)
    with pytest.raises(NotFound):
        await _read(store, digest)
    path = tmp_path / "upload"
    path.write_bytes(data)
    await store.raw.put(SCOPE, digest, path, len(data))
    assert await _read(store, digest) == data
    assert await store.read(_count, digest) == (3, 1)


async def _block(tx: Tx, digest: bytes) -> None:
    await tx.execute(
        "INSERT INTO erasure_blocklist (scope_id, digest, kind, erasure_id, created_at)"
        " VALUES (?, ?, 'content', ?, 1)",
        await tx.scope_id(SCOPE),
        digest,
        new_id(),
    )


async def test_blocklisted_bytes_are_refused(
    store: SqliteStore | PostgresStore, tmp_path: Path
) -> None:
    data = _bytes(9 * MiB)
    digest = content_hash(data)
    path = tmp_path / "upload"
    path.write_bytes(data)
    await store.transaction("block", _block, digest)
    with pytest.raises(ContentErased):
        await store.raw.put(SCOPE, digest, path, len(data))
    assert await store.read(_count, digest) == (0, 0)


async def test_a_scan_is_one_snapshot(store: SqliteStore | PostgresStore, tmp_path: Path) -> None:
    path = tmp_path / "upload"
    path.write_bytes(b"abc")
    await store.raw.put(SCOPE, content_hash(b"abc"), path, 3)
    async with store.scan() as scan:
        before = await scan.scopes()
        # A write beside the open snapshot (it interns a new scope) is not seen by it.
        await store.raw.put(Scope("t", "later"), content_hash(b"abc"), path, 3)
        assert await scan.scopes() == before == {next(iter(before)): SCOPE}
        assert [v async for v in scan.versions(10)] == []
        assert await scan.jobs_at([b"\x00" * 16]) == []
        assert await scan.versions_at([]) == []
    async with store.scan() as scan:
        assert set((await scan.scopes()).values()) == {SCOPE, Scope("t", "later")}
