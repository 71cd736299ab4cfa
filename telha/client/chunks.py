"""The retrieval-chunk calls of :class:`telha.client.AsyncTelha` (docs/cli-and-client.md):
``GET /v1/sources/{sourceId}/versions/{tx}/chunks``, a page at a time or over all pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

from telha.client.calls import Calls
from telha.wire import ChunkList, ChunkOut

__all__ = ["ChunkCalls"]


class ChunkCalls(Calls):
    """Chunk methods over the client's ``_get`` (a base of :class:`AsyncTelha`)."""

    async def chunks_page(
        self,
        source_id: str,
        tx: int,
        *,
        max_bytes: int | None = None,
        overlap: int | None = None,
        within: Literal["section", "document"] | None = None,
        units: Literal["byte", "codepoint", "utf16"] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ChunkList:
        """One page of version ``tx``'s retrieval chunks (see :meth:`chunks`); pass its
        ``next_cursor`` (``None`` on the last page) with the same parameters for the next.

        :raises InvalidRequest: a parameter out of range, or a cursor of other parameters.
        :raises NotFound: no such source or version in this scope.
        :raises ContentErased: the version was erased.
        """
        params = {"maxBytes": max_bytes, "overlap": overlap, "within": within, "units": units,
                  "limit": limit, "cursor": cursor}  # fmt: skip
        return await self._get(f"/v1/sources/{source_id}/versions/{tx}/chunks", ChunkList, params)

    async def chunks(
        self,
        source_id: str,
        tx: int,
        *,
        max_bytes: int = 2048,
        overlap: int = 0,
        within: Literal["section", "document"] = "section",
        units: Literal["byte", "codepoint", "utf16"] = "byte",
        page_size: int = 500,
    ) -> AsyncIterator[ChunkOut]:
        """Every retrieval chunk of version ``tx`` (µs) of ``source_id``, in reading order,
        over all pages (``page_size`` per request, at most 1000): ``text`` at most
        ``max_bytes`` UTF-8 bytes (64 to 1 MiB), ``start``/``end``/``ranges`` in ``units``,
        ``heading_path``, ``pages`` and ``node_ids`` (docs/rest-api.md, "Chunks").

        :param overlap: bytes a chunk may repeat of the one before (at most
            ``max_bytes // 2``).
        :param within: ``section`` (chunks never cross a top-level section) or
            ``document``.
        :raises InvalidRequest: a parameter out of range.
        :raises NotFound: no such source or version in this scope.
        :raises ContentErased: the version was erased.
        """
        cursor = None
        while True:
            page = await self.chunks_page(
                source_id, tx, max_bytes=max_bytes, overlap=overlap, within=within,
                units=units, limit=page_size, cursor=cursor,
            )  # fmt: skip
            for chunk in page.chunks:
                yield chunk
            cursor = page.next_cursor
            if cursor is None:
                return
