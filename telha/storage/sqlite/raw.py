"""Raw uploaded bytes on SQLite (issue 4 "large uploads"): content-addressed per scope, in
chunks of exactly :data:`~telha.domain.model.BLOB_CHUNK` bytes, written a few chunks per transaction
so a large upload never holds the writer for long, and read back one chunk per reader hop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from telha.domain.erasure import ERASED_MESSAGE
from telha.domain.errors import ContentErased, NotFound
from telha.domain.ids import now_us
from telha.domain.model import BLOB_CHUNK, Scope
from telha.storage.sqlite.base import SqliteBase, blocked

__all__ = ["RawMixin"]

#: Chunks written per transaction: 8 MiB keeps each writer hold in the tens of milliseconds.
_CHUNKS_PER_TX = 8


class RawMixin(SqliteBase):
    """Raw blob operations; see :class:`telha.storage.protocol.Storage`."""

    #: One lock per (scope, digest) being stored.
    _raw_locks: dict[tuple[Scope, bytes], anyio.Lock]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw_locks = {}

    async def has_raw(self, scope: Scope, digest: bytes) -> bool:
        """See :meth:`telha.storage.protocol.Storage.has_raw`."""
        sid = await self._scope_id(scope)
        if sid is None:
            return False
        rows = await self._fetchall(
            "SELECT 1 FROM raw_blobs WHERE scope_id = ? AND content_hash = ? AND complete = 1",
            (sid, digest),
        )
        return bool(rows)

    async def store_raw(self, scope: Scope, digest: bytes, path: Path, size: int) -> None:
        """See :meth:`telha.storage.protocol.Storage.store_raw`.

        Two uploads of the same bytes at once (a client retrying) store them once: the second
        waits for the first, then finds them stored.
        """
        key = (scope, digest)
        lock = self._raw_locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                if await self.has_raw(scope, digest):
                    return  # content-addressed: those bytes are stored already
                await self._store_raw_chunks(scope, digest, path, size)
        finally:
            if not lock.statistics().tasks_waiting and not lock.locked():
                self._raw_locks.pop(key, None)

    async def _store_raw_chunks(self, scope: Scope, digest: bytes, path: Path, size: int) -> None:

        def begin(conn: sqlite3.Connection) -> int:
            sid = self._tx_scope_id(conn, scope)
            if blocked(conn, sid, (digest,)):
                raise ContentErased(ERASED_MESSAGE)
            conn.execute(
                "INSERT OR REPLACE INTO raw_blobs (scope_id, content_hash, size, complete,"
                " created_at) VALUES (?, ?, ?, 0, ?)",
                (sid, digest, size, now_us()),
            )
            # A store cut short earlier may have left chunks past this file's end.
            conn.execute(
                "DELETE FROM raw_chunks WHERE scope_id = ? AND content_hash = ?", (sid, digest)
            )
            return sid

        sid = await self._write("store raw bytes", begin)
        with path.open("rb") as f:
            idx = 0
            while True:

                def put(conn: sqlite3.Connection, first: int) -> int:
                    # Runs on the writer's thread: the file reads stay off the event loop.
                    n = 0
                    while n < _CHUNKS_PER_TX:
                        data = f.read(BLOB_CHUNK)
                        if not data:
                            break
                        conn.execute(
                            "INSERT INTO raw_chunks (scope_id, content_hash, idx, data)"
                            " VALUES (?, ?, ?, ?)",
                            (sid, digest, first + n, data),
                        )
                        n += 1
                    return n

                written = await self._write("store raw bytes", put, idx)
                idx += written
                if written < _CHUNKS_PER_TX:
                    break

        def finish(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE raw_blobs SET complete = 1 WHERE scope_id = ? AND content_hash = ?",
                (sid, digest),
            )

        await self._write("store raw bytes", finish)

    async def read_raw(
        self, scope: Scope, digest: bytes, offset: int = 0
    ) -> AsyncIterator[tuple[int, bytes, int]]:
        """See :meth:`telha.storage.protocol.Storage.read_raw`."""
        sid = await self._scope_id(scope)
        rows = (
            await self._fetchall(
                "SELECT size FROM raw_blobs WHERE scope_id = ? AND content_hash = ?"
                " AND complete = 1",
                (sid, digest),
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
            # One chunk per reader hop: a slow consumer never holds a pooled connection.
            chunk = await self._fetchall(
                "SELECT data FROM raw_chunks WHERE scope_id = ? AND content_hash = ? AND idx = ?",
                (sid, digest, idx),
            )
            if not chunk:
                raise NotFound(f"raw bytes {digest.hex()} lack chunk {idx}")
            data: bytes = chunk[0][0]
            yield idx * BLOB_CHUNK + skip, data[skip:], size
            skip = 0
            idx += 1
