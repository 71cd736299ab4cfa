"""Raw uploaded bytes on PostgreSQL (issue 4 "large uploads"): content-addressed per scope, in
chunks of exactly :data:`~telha.domain.model.BLOB_CHUNK` bytes, a few chunks per transaction.

Several replicas may store the same bytes at once (a client retrying against another
replica): every chunk is an upsert of the same bytes at the same index (the digest fixes
them), and ``complete`` is set only after the last chunk of a store, so whichever store
finishes first makes the blob readable and the other rewrites identical bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from telha.domain.erasure import ERASED_MESSAGE
from telha.domain.errors import ContentErased, NotFound
from telha.domain.ids import now_us
from telha.domain.model import BLOB_CHUNK, Scope
from telha.storage.postgres.base import Conn, PgBase, blocked

__all__ = ["RawMixin"]

#: Chunks written per transaction (8 MiB).
_CHUNKS_PER_TX = 8


def _read_chunks(path: Path, first: int, count: int) -> list[bytes]:
    """Up to ``count`` chunks of ``path`` from chunk ``first`` (runs in a worker thread)."""
    with path.open("rb") as f:
        f.seek(first * BLOB_CHUNK)
        chunks = []
        for _ in range(count):
            data = f.read(BLOB_CHUNK)
            if not data:
                break
            chunks.append(data)
        return chunks


class RawMixin(PgBase):
    """Raw blob operations; see :class:`telha.storage.protocol.Storage`."""

    #: One lock per (scope, digest) being stored by this process.
    _raw_locks: dict[tuple[Scope, bytes], anyio.Lock]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw_locks = {}

    async def has_raw(self, scope: Scope, digest: bytes) -> bool:
        """See :meth:`telha.storage.protocol.Storage.has_raw`."""
        sid = await self._scope_id(scope)
        if sid is None:
            return False
        rows = await self._fetch(
            "SELECT 1 FROM raw_blobs WHERE scope_id = $1 AND content_hash = $2 AND complete",
            sid,
            digest,
        )
        return bool(rows)

    async def store_raw(self, scope: Scope, digest: bytes, path: Path, size: int) -> None:
        """See :meth:`telha.storage.protocol.Storage.store_raw`.

        Two uploads of the same bytes at once in this process store them once: the second
        waits for the first, then finds them stored.
        """
        key = (scope, digest)
        lock = self._raw_locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                if await self.has_raw(scope, digest):
                    return
                await self._store_raw_chunks(scope, digest, path, size)
        finally:
            if not lock.statistics().tasks_waiting and not lock.locked():
                self._raw_locks.pop(key, None)

    async def _store_raw_chunks(self, scope: Scope, digest: bytes, path: Path, size: int) -> None:
        sid = await self._ensure_scope(scope)

        async def begin(conn: Conn) -> None:
            if await blocked(conn, sid, (digest,)):
                raise ContentErased(ERASED_MESSAGE)
            await conn.execute(
                "INSERT INTO raw_blobs (scope_id, content_hash, size, complete, created_at)"
                " VALUES ($1, $2, $3, false, $4) ON CONFLICT DO NOTHING",
                sid,
                digest,
                size,
                now_us(),
            )

        await self._write("store raw bytes", begin)
        idx = 0
        while True:
            chunks = await anyio.to_thread.run_sync(_read_chunks, path, idx, _CHUNKS_PER_TX)

            async def put(conn: Conn, first: int, chunks: list[bytes]) -> None:
                await conn.executemany(
                    "INSERT INTO raw_chunks (scope_id, content_hash, idx, data)"
                    " VALUES ($1, $2, $3, $4)"
                    " ON CONFLICT (scope_id, content_hash, idx) DO UPDATE SET data = excluded.data",
                    [(sid, digest, first + n, data) for n, data in enumerate(chunks)],
                )

            if chunks:
                await self._write("store raw bytes", put, idx, chunks)
            idx += len(chunks)
            if len(chunks) < _CHUNKS_PER_TX:
                break

        async def finish(conn: Conn) -> None:
            await conn.execute(
                "UPDATE raw_blobs SET complete = true WHERE scope_id = $1 AND content_hash = $2",
                sid,
                digest,
            )

        await self._write("store raw bytes", finish)

    async def read_raw(
        self, scope: Scope, digest: bytes, offset: int = 0
    ) -> AsyncIterator[tuple[int, bytes, int]]:
        """See :meth:`telha.storage.protocol.Storage.read_raw`."""
        sid = await self._scope_id(scope)
        rows = (
            await self._fetch(
                "SELECT size FROM raw_blobs WHERE scope_id = $1 AND content_hash = $2 AND complete",
                sid,
                digest,
            )
            if sid is not None
            else []
        )
        if not rows:
            raise NotFound(f"no stored raw bytes with content hash {digest.hex()}")
        size = int(rows[0][0])
        if not 0 <= offset <= size:
            raise NotFound(f"offset {offset} is outside the raw bytes ({size} bytes)")
        idx, skip = divmod(offset, BLOB_CHUNK)
        while idx * BLOB_CHUNK < size:
            # One chunk per statement: a slow consumer never holds a pooled connection.
            chunk = await self._fetch(
                "SELECT data FROM raw_chunks WHERE scope_id = $1 AND content_hash = $2"
                " AND idx = $3",
                sid,
                digest,
                idx,
            )
            if not chunk:
                raise NotFound(f"raw bytes {digest.hex()} lack chunk {idx}")
            data: bytes = chunk[0][0]
            yield idx * BLOB_CHUNK + skip, data[skip:], size
            skip = 0
            idx += 1
