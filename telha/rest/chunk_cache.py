"""A bounded cache of cut chunks for ``GET …/versions/{tx}/chunks``
(:mod:`telha.rest.chunk_routes`), one per REST front."""

from __future__ import annotations

from collections import OrderedDict

from telha.domain.chunking import Chunk

__all__ = ["ChunkCache"]


class ChunkCache:
    """The chunks last cut, by ``(scope, source id, tx, maxBytes, overlap, within)``, so the
    pages after the first of a listing cost no new cut: at most ``max_entries`` versions and
    ``max_text_bytes`` of their texts (least recently used first out). A version's text,
    spans and nodes never change; a hit is served only after the store confirmed the version
    is still there and not erased."""

    def __init__(self, max_entries: int = 8, max_text_bytes: int = 64 * 1024 * 1024) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_text_bytes
        self._entries: OrderedDict[tuple[object, ...], tuple[bytes, list[Chunk]]] = OrderedDict()

    def get(self, key: tuple[object, ...]) -> tuple[bytes, list[Chunk]] | None:
        """The text and chunks kept for ``key``, if any."""
        hit = self._entries.get(key)
        if hit is not None:
            self._entries.move_to_end(key)
        return hit

    def put(self, key: tuple[object, ...], text: bytes, chunks: list[Chunk]) -> None:
        """Keep ``text`` and ``chunks`` for ``key`` (a text over the byte bound is not kept)."""
        if len(text) > self._max_bytes:
            return
        self._entries[key] = (text, chunks)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries or (
            sum(len(t) for t, _ in self._entries.values()) > self._max_bytes
        ):
            self._entries.popitem(last=False)
