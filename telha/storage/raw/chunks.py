"""Raw uploaded bytes, written once for both engines (docs/formats.md, "Large files"):
content-addressed per scope, in chunks of exactly :data:`~telha.domain.model.BLOB_CHUNK`
bytes.

A store writes a few chunks per transaction, so a large upload never holds SQLite's writer
for long, and marks the blob complete in its last transaction: a store cut short is never
read, and the next store of the same bytes overwrites it. Every chunk is an upsert of the
same bytes at the same index (the digest fixes them), so two stores of the same bytes at
once (a client retrying against another PostgreSQL replica) both end with the same rows,
and whichever finishes first makes the blob readable. The erasure blocklist refuses the
bytes in the first transaction (docs/operations.md, "Erasure").

A read hands back one chunk per :meth:`~telha.storage.core.engine.EngineOps.read`, so a
slow consumer never holds a pooled connection.
"""

from __future__ import annotations

import os
from pathlib import Path

from telha.domain.erasure import ERASED_MESSAGE
from telha.domain.errors import ContentErased, NotFound
from telha.domain.ids import now_us
from telha.domain.model import BLOB_CHUNK, Scope
from telha.storage.core.blocklist import blocked
from telha.storage.core.tx import Tx

__all__ = ["has_raw", "raw_chunk", "raw_head", "refresh_raw", "store_chunks"]

#: Chunks written per transaction: 8 MiB keeps each writer hold in the tens of milliseconds.
CHUNKS_PER_TX = 8


async def has_raw(tx: Tx, scope: Scope, digest: bytes) -> bool:
    """Whether the raw bytes with ``digest`` are stored complete in ``scope``."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return False
    row = await tx.fetchone(
        "SELECT 1 FROM raw_blobs WHERE scope_id = ? AND content_hash = ? AND complete", sid, digest
    )
    return row is not None


async def store_chunks(
    tx: Tx,
    scope: Scope,
    digest: bytes,
    size: int,
    first: int,
    chunks: list[bytes],
    last: bool,
) -> int:
    """Write ``chunks`` at indexes ``first``… of the blob ``digest``, and mark the blob
    complete when ``last``; returns the scope id. The first call (``first == 0``) refuses
    blocklisted bytes and makes the blob's row (incomplete), or refreshes its ``created_at``
    when it exists (so retention never removes a blob being stored, see
    :mod:`telha.storage.retention.passes`).

    :raises ContentErased: ``digest`` is on the scope's erasure blocklist.
    """
    sid = await tx.scope_id(scope)
    if first == 0:
        if await blocked(tx, sid, (digest,)):
            raise ContentErased(ERASED_MESSAGE)
        await tx.execute(
            "INSERT INTO raw_blobs (scope_id, content_hash, size, complete, created_at)"
            " VALUES (?, ?, ?, false, ?) ON CONFLICT (scope_id, content_hash)"
            " DO UPDATE SET created_at = excluded.created_at",
            sid,
            digest,
            size,
            now_us(),
        )
    await tx.executemany(
        "INSERT INTO raw_chunks (scope_id, content_hash, idx, data) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (scope_id, content_hash, idx) DO UPDATE SET data = excluded.data",
        [(sid, digest, first + n, data) for n, data in enumerate(chunks)],
    )
    if last:
        await tx.execute(
            "UPDATE raw_blobs SET complete = true WHERE scope_id = ? AND content_hash = ?",
            sid,
            digest,
        )
    return sid


async def refresh_raw(tx: Tx, scope: Scope, digest: bytes, now_us: int) -> bool:
    """Whether the raw bytes with ``digest`` are stored complete in ``scope``; when they are,
    their ``created_at`` becomes ``now_us``, so retention (which removes only blobs written
    before its cutoff) cannot remove them before the job about to name them is enqueued."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return False
    changed = await tx.execute(
        "UPDATE raw_blobs SET created_at = ? WHERE scope_id = ? AND content_hash = ?"
        " AND complete",
        now_us, sid, digest,
    )  # fmt: skip
    return changed > 0


async def raw_head(
    tx: Tx, scope: Scope, digest: bytes, offset: int
) -> tuple[int, int, bytes | None]:
    """``(scope id, size, data)`` of complete raw bytes, with ``data`` the chunk that holds
    byte ``offset`` (``None`` at the end).

    :raises NotFound: no complete raw bytes with ``digest``, or ``offset`` is outside them.
    """
    sid = await tx.known_scope_id(scope)
    row = None
    if sid is not None:
        row = await tx.fetchone(
            "SELECT size FROM raw_blobs WHERE scope_id = ? AND content_hash = ? AND complete",
            sid,
            digest,
        )
    if sid is None or row is None:
        raise NotFound(f"no stored raw bytes with content hash {digest.hex()}")
    size = int(row[0])
    if not 0 <= offset <= size:
        raise NotFound(f"offset {offset} is outside the raw bytes ({size} bytes)")
    idx = offset // BLOB_CHUNK
    data = await raw_chunk(tx, sid, digest, idx) if idx * BLOB_CHUNK < size else None
    return sid, size, data


async def raw_chunk(tx: Tx, sid: int, digest: bytes, idx: int) -> bytes:
    """Chunk ``idx`` of the raw bytes ``digest``.

    :raises NotFound: the chunk is missing.
    """
    row = await tx.fetchone(
        "SELECT data FROM raw_chunks WHERE scope_id = ? AND content_hash = ? AND idx = ?",
        sid,
        digest,
        idx,
    )
    if row is None:
        raise NotFound(f"raw bytes {digest.hex()} lack chunk {idx}")
    return bytes(row[0])


def read_chunks(path: Path, first: int, count: int) -> tuple[list[bytes], bool]:
    """Up to ``count`` chunks of ``path`` from chunk ``first``, and whether they reach the
    end of the file (runs in a worker thread)."""
    with path.open("rb") as f:
        f.seek(first * BLOB_CHUNK)
        chunks = []
        for _ in range(count):
            data = f.read(BLOB_CHUNK)
            if not data:
                break
            chunks.append(data)
        return chunks, f.tell() >= os.fstat(f.fileno()).st_size
