"""The raw upload aggregate of a store (``store.raw``; docs/formats.md, "Large files:
multipart upload")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from telha.domain.ids import now_us
from telha.domain.model import BLOB_CHUNK, Scope
from telha.storage.core.engine import EngineOps
from telha.storage.raw.chunks import (
    CHUNKS_PER_TX,
    has_raw,
    raw_chunk,
    raw_head,
    read_chunks,
    refresh_raw,
    store_chunks,
)

__all__ = ["Raw"]


class Raw:
    """The raw upload aggregate of a store (``store.raw``; its contract:
    :class:`telha.storage.raw.role.RawStore`), over ``engine``'s runners. A component
    the store composes, not a mixin."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine
        #: One lock per (scope, digest) being stored by this process.
        self._locks: dict[tuple[Scope, bytes], anyio.Lock] = {}

    async def has(self, scope: Scope, digest: bytes) -> bool:
        """See :func:`has_raw`."""
        return await self._engine.read(has_raw, scope, digest)

    async def put(self, scope: Scope, digest: bytes, path: Path, size: int) -> None:
        """Store the file at ``path`` (``size`` bytes, BLAKE3 ``digest``) a few chunks per
        transaction (:func:`store_chunks`); when those bytes are stored already, only their
        ``created_at`` is refreshed (:func:`refresh_raw`).

        Two uploads of the same bytes at once in this process store them once: the second
        waits for the first, then finds them stored.

        :raises ContentErased: ``digest`` is on the scope's erasure blocklist.
        """
        key = (scope, digest)
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                if await self.has(scope, digest) and await self._engine.transaction(
                    "refresh raw bytes", refresh_raw, scope, digest, now_us()
                ):
                    return  # content-addressed: those bytes are stored already
                idx, last = 0, False
                while not last:
                    # The file is read off the event loop, and outside the transaction.
                    chunks, last = await anyio.to_thread.run_sync(
                        read_chunks, path, idx, CHUNKS_PER_TX
                    )
                    await self._engine.transaction(
                        "store raw bytes", store_chunks, scope, digest, size, idx, chunks, last
                    )
                    idx += len(chunks)
        finally:
            if not lock.statistics().tasks_waiting and not lock.locked():
                self._locks.pop(key, None)

    async def read(
        self, scope: Scope, digest: bytes, offset: int = 0
    ) -> AsyncIterator[tuple[int, bytes, int]]:
        """The stored raw bytes from byte ``offset`` on, as ``(offset, data, total size)``
        chunks of at most 1 MiB, one chunk per read.

        :raises NotFound: no complete raw bytes with ``digest`` in ``scope``, ``offset`` is
            past their end, or a chunk is missing.
        """
        sid, size, data = await self._engine.read(raw_head, scope, digest, offset)
        idx, skip = divmod(offset, BLOB_CHUNK)
        while data is not None:
            yield idx * BLOB_CHUNK + skip, data[skip:], size
            skip = 0
            idx += 1
            if idx * BLOB_CHUNK >= size:
                break
            data = await self._engine.read(raw_chunk, sid, digest, idx)
