"""Identity and time (docs/architecture.md, "Identity, versions and provenance").

- ``source_id_for(name)``: ``UUID(int=xxh3_128(b"src:" + name_utf8))``, deterministic in the name.
- ``content_hash(raw)``: BLAKE3 of the raw bytes, 32 bytes.
- ``new_id()``: a uuid7 (time-ordered) as 16 bytes, for logical node/edge ids and job ids.
- :class:`TxClock`: strictly increasing transaction time in microseconds since the Unix epoch.
"""

from __future__ import annotations

import time
import uuid

import blake3
import uuid_utils
import xxhash

__all__ = [
    "TxClock",
    "blob_id_for",
    "content_hash",
    "id_str",
    "new_id",
    "now_us",
    "source_id_for",
]


def source_id_for(name: str) -> uuid.UUID:
    """The source id of a caller-supplied name or URL: xxh3-128 of ``"src:" + name``."""
    return uuid.UUID(int=xxhash.xxh3_128_intdigest(b"src:" + name.encode("utf-8")))


def content_hash(data: bytes) -> bytes:
    """BLAKE3 digest (32 bytes) of ``data``; multithreaded above 1 MiB."""
    if len(data) > 1 << 20:
        return blake3.blake3(data, max_threads=blake3.blake3.AUTO).digest()
    return blake3.blake3(data).digest()


def blob_id_for(canonical_hash: bytes) -> uuid.UUID:
    """Single-shot blob id: the first 16 bytes of the canonical text's BLAKE3."""
    return uuid.UUID(bytes=canonical_hash[:16])


def new_id() -> bytes:
    """A fresh uuid7 as its 16 bytes (time-ordered, so listings by id follow creation order)."""
    return uuid_utils.uuid7().bytes


def id_str(raw: bytes) -> str:
    """The canonical UUID string (``8-4-4-4-12`` lowercase hex) of 16 id bytes; ~6x faster
    than ``str(uuid.UUID(bytes=raw))``, which matters for 10,000-id responses."""
    return str(uuid_utils.UUID(bytes=raw))


def now_us() -> int:
    """Wall-clock time in microseconds since the Unix epoch."""
    return time.time_ns() // 1000


class TxClock:
    """Strictly increasing transaction time (µs): ``tx = max(now_us, last_tx + 1)``.

    One clock per store; the single writer is its only caller, so no two versions share a tx.
    """

    def __init__(self, last_tx: int = 0) -> None:
        self._last = last_tx

    @property
    def last(self) -> int:
        """The last transaction time handed out (µs), 0 before the first."""
        return self._last

    def next(self) -> int:
        """Hand out the next transaction time (µs)."""
        tx = max(now_us(), self._last + 1)
        self._last = tx
        return tx
