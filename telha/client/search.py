"""The search calls of :class:`telha.client.AsyncTelha` (docs/cli-and-client.md, docs/rest-api.md
"Search" and "Locate a quote"): ``GET /v1/search`` and ``POST /v1/locate``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import anyio
import msgspec

from telha.client.calls import Calls
from telha.client.errors import NotFound
from telha.wire import LocatedOut, SearchResult

__all__ = ["SearchCalls"]


class SearchCalls(Calls):
    """Search methods over the client's ``_get`` and ``_request`` (a base of
    :class:`AsyncTelha`)."""

    async def search(
        self,
        q: str,
        *,
        label: str | None = None,
        source_id: str | None = None,
        format: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        units: str | None = None,
    ) -> SearchResult:
        """``GET /v1/search``: one page of the scope's current spans matching ``q`` (words,
        all required; ``"phrases"``; ``prefix*``), best first (``limit`` default 20, at most
        100); pass ``next_cursor`` (``None`` on the last page) with the same query for the
        next. Each hit's ``matches`` are UTF-8 byte ranges of the matched words in the
        version's canonical text (:meth:`text` slices them); ``units`` (``byte``,
        ``codepoint``, ``utf16``) answers every offset in those units instead.

        :raises InvalidRequest: an empty or malformed query (unbalanced quotes or
            parentheses, a ``*`` not ending a word), a bad filter, limit, cursor or units.
        :raises NotFound: search is disabled on the server.
        """
        params = {"q": q, "label": label, "sourceId": source_id, "format": format,
                  "limit": limit, "cursor": cursor, "units": units}  # fmt: skip
        return await self._get("/v1/search", SearchResult, params)

    async def index_pending(self) -> int:
        """The scope's versions whose search index rows still wait to be written or
        deleted: the ``indexPending`` of a one-hit search for a word nothing holds (that
        search also does up to the server's ``[search] catch_up_ms`` of the scope's index
        work first). 0 when search is disabled on the server."""
        try:
            found = await self.search(f"z{uuid.uuid4().hex}", limit=1)
        except NotFound:
            return 0
        return found.index_pending

    async def wait_index(
        self, *, poll_s: float = 0.5, on_pending: Callable[[int], None] | None = None
    ) -> None:
        """Return once :meth:`index_pending` reads 0, asking every ``poll_s`` seconds (the
        asks themselves help the index along); ``on_pending(n)`` is called with each
        non-zero count. No time limit: wrap it in ``anyio.fail_after`` for one."""
        while pending := await self.index_pending():
            if on_pending is not None:
                on_pending(pending)
            await anyio.sleep(poll_s)

    async def locate(
        self,
        text: str,
        *,
        source_id: str | None = None,
        limit: int | None = None,
        units: str | None = None,
    ) -> list[LocatedOut]:
        """``POST /v1/locate``: every place of the scope's current versions where the quote
        ``text`` occurs, overlapping and inside words included, compared folded (whitespace
        runs, case, accents, compatibility forms, ignorables; ``match`` says ``"exact"``
        when the bytes are the quote's, else ``"folded"``), by source, version and offset
        (bytes, or ``units``: ``codepoint``, ``utf16``).

        :raises InvalidRequest: an empty quote, one over 10,000 bytes or without a word, a
            bad ``source_id``, ``limit`` (1–1000) or ``units``.
        :raises NotFound: search is disabled on the server.
        """
        body: dict[str, Any] = {"text": text}
        if source_id is not None:
            body["sourceId"] = source_id
        if limit is not None:
            body["limit"] = limit
        url = "/v1/locate" if units is None else f"/v1/locate?units={quote(units)}"
        resp = await self._request("POST", url, lambda: {"json": body})
        return msgspec.json.decode(resp.content, type=list[LocatedOut])
