"""The listing calls of :class:`telha.client.AsyncTelha` (docs/cli-and-client.md):
``GET /v1/sources`` and ``GET /v1/ingest``, a page at a time or over all pages."""

from __future__ import annotations

from collections.abc import AsyncIterator

from telha.client.calls import Calls
from telha.wire import JobList, JobSummaryOut, SourceList, SourceSummaryOut

__all__ = ["ListingCalls"]


class ListingCalls(Calls):
    """Listing methods over the client's ``_get`` (a base of :class:`AsyncTelha`)."""

    async def sources_page(
        self,
        *,
        prefix: str | None = None,
        format: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> SourceList:
        """``GET /v1/sources``: one page of the scope's sources, newest change first
        (``limit`` default 100, at most 1000); pass its ``next_cursor`` (``None`` on the last
        page) with the same filters for the next.

        :param prefix: only names starting with it.
        :param format: only sources of this format.
        :param state: ``pending`` (jobs only, dead ones included), ``current``, ``retired``
            or ``erased``.
        :raises InvalidRequest: a bad filter, limit or cursor.
        """
        params = {"prefix": prefix, "format": format, "state": state, "limit": limit,
                  "cursor": cursor}  # fmt: skip
        return await self._get("/v1/sources", SourceList, params)

    async def list_sources(
        self,
        *,
        prefix: str | None = None,
        format: str | None = None,
        state: str | None = None,
        page_size: int = 500,
    ) -> AsyncIterator[SourceSummaryOut]:
        """Every source of the scope matching the filters (see :meth:`sources_page`), newest
        change first, over all pages (``page_size`` per request, at most 1000).

        :raises InvalidRequest: a bad filter.
        """
        cursor = None
        while True:
            page = await self.sources_page(prefix=prefix, format=format, state=state,
                                           limit=page_size, cursor=cursor)  # fmt: skip
            for found in page.sources:
                yield found
            cursor = page.next_cursor
            if cursor is None:
                return

    async def jobs_page(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        source_id: str | None = None,
        parent: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobList:
        """``GET /v1/ingest``: one page of the scope's jobs, newest first (``limit`` default
        100, at most 1000); pass its ``next_cursor`` (``None`` on the last page) with the
        same filters for the next.

        :param state: ``pending``, ``leased``, ``completed``, ``dead`` or ``cancelled``.
        :param kind: ``ingest:<format>`` or ``erase``.
        :param parent: a job id: only the jobs its completion enqueued (an e-mail's
            attachments, an archive's files).
        :raises InvalidRequest: a bad filter, limit or cursor.
        """
        params = {"state": state, "kind": kind, "sourceId": source_id, "parent": parent,
                  "limit": limit, "cursor": cursor}  # fmt: skip
        return await self._get("/v1/ingest", JobList, params)

    async def list_jobs(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        source_id: str | None = None,
        parent: str | None = None,
        page_size: int = 500,
    ) -> AsyncIterator[JobSummaryOut]:
        """Every job of the scope matching the filters (see :meth:`jobs_page`), newest
        first, over all pages (``page_size`` per request, at most 1000).

        :raises InvalidRequest: a bad filter.
        """
        cursor = None
        while True:
            page = await self.jobs_page(state=state, kind=kind, source_id=source_id,
                                        parent=parent, limit=page_size, cursor=cursor)  # fmt: skip
            for found in page.jobs:
                yield found
            cursor = page.next_cursor
            if cursor is None:
                return
