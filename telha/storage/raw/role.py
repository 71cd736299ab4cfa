"""The raw upload aggregate's role (docs/formats.md, "Large files: multipart upload"): a
store's ``raw``. Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

from telha.domain.model import Scope

__all__ = ["RawStore"]


class RawStore(Protocol):
    """Raw uploaded bytes, content-addressed, a store's ``raw``
    (:class:`~telha.storage.raw.aggregate.Raw`): stored by the Ingestor, streamed to workers by
    ``FetchContent``."""

    async def has(self, scope: Scope, digest: bytes) -> bool:
        """Whether raw bytes with BLAKE3 ``digest`` are stored complete in ``scope``."""

    async def put(self, scope: Scope, digest: bytes, path: Path, size: int) -> None:
        """Store the file at ``path`` (``size`` bytes, BLAKE3 ``digest``, checked by the caller)
        content-addressed in 1 MiB chunks, a few chunks per transaction; when those bytes
        are stored already, only their ``created_at`` is refreshed (so retention keeps them
        for the job about to name them). Marked complete in the last transaction, so a store
        cut short is never read and is overwritten by the next store of the same bytes."""

    def read(
        self, scope: Scope, digest: bytes, offset: int = 0
    ) -> AsyncIterator[tuple[int, bytes, int]]:
        """The stored raw bytes from byte ``offset`` on, as ``(offset, data, total size)``
        chunks of at most 1 MiB.

        :raises NotFound: no complete raw bytes with ``digest`` in ``scope``, or ``offset`` is
            past their end.
        """
