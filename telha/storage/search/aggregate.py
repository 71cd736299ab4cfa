"""The search aggregate of a store (``store.search``): search and locate over the full-text
index, and the index's writer (docs/rest-api.md, "Search" and "Locate a quote")."""

from __future__ import annotations

import anyio

from telha.domain.ids import now_us
from telha.domain.model import Scope
from telha.domain.row_faults import RowFault
from telha.domain.search_query import Quote, Term
from telha.storage.core.engine import EngineOps
from telha.storage.core.failed_rows import record
from telha.storage.search.candidates import Filters
from telha.storage.search.queries import (
    CATCH_UP_S,
    INDEX_BATCH,
    Located,
    SearchHit,
    index_step,
    locate,
    queued,
    search,
    settled_search,
)

__all__ = ["Search"]


class Search:
    """The search aggregate of a store (``store.search``; its contract:
    :class:`telha.storage.protocol.SearchStore`): the reads, each one
    :meth:`~telha.storage.core.engine.EngineOps.read` after :meth:`catch_up`, and the
    index's writer (:meth:`index_queued`). A component the store composes, not a mixin:
    ``engine`` runs each operation.

    :param engine: the store's runners; its ``search_enabled`` says whether the index is
        kept.
    """

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine
        #: Most seconds :meth:`catch_up` works before a search answers (``[search]
        #: catch_up_ms``; :func:`telha.storage.open_store` sets it).
        self.catch_up_s: float = CATCH_UP_S

    @property
    def enabled(self) -> bool:
        """``[search] enabled``: the index is kept."""
        return self._engine.search_enabled

    async def page(
        self,
        scope: Scope,
        terms: list[Term],
        filters: Filters,
        *,
        limit: int,
        offset: int,
        rank_window: int = 0,
    ) -> tuple[list[SearchHit], int]:
        """:func:`search` after :meth:`catch_up`, and the versions still waiting when it
        answered: ``(hits, waiting)``. When nothing waits (the usual case) that is one read:
        the check and the search share its snapshot."""
        args = (scope, terms, filters, limit, offset, rank_window)
        read = self._engine.read
        if self._engine.search_enabled:
            settled = await read(settled_search, *args)
            if settled is not None:
                return settled, 0
            await self.catch_up(scope)
        return await read(search, *args), await self.queued_versions(scope)

    async def locate(
        self,
        scope: Scope,
        quote: Quote,
        *,
        source_id: bytes | None,
        limit: int,
        principals: tuple[str, ...] | None = None,
    ) -> list[Located]:
        """See :func:`locate`."""
        await self.catch_up(scope)
        return await self._engine.read(locate, scope, quote, source_id, limit, principals)

    async def index_queued(self, *, scope: Scope | None = None, limit: int = INDEX_BATCH) -> int:
        """One batch of the index's waiting work (of ``scope``, or of any scope) in one
        transaction: up to ``limit`` rows of a stale version deleted, else up to ``limit``
        span rows of the oldest version being filled written. Returns the rows deleted or
        written (at least 1 while anything waited), 0 when nothing waits
        (:func:`telha.storage.search.index.index_pending`).

        :raises StorageError: the driver failed; nothing of this batch was written.
        :raises RowFault: a version being filled cannot be indexed (its canonical text is
            missing, a span row is out of its range, labels that do not decode): nothing
            of this batch was written; record it
            (:meth:`~telha.storage.core.operations.SharedOps.fail_row`) and call again.
        """
        return await self._engine.transaction("index search spans", index_step, scope, limit)

    async def queued_versions(self, scope: Scope | None = None) -> int:
        """Versions whose index rows wait to be written or deleted (of ``scope``, or of
        every scope)."""
        return await self._engine.read(queued, scope)

    async def catch_up(self, scope: Scope) -> int:
        """Do the index work ``scope`` has waiting, for at most :attr:`catch_up_s` seconds,
        so a search reads what its scope published before it; returns the versions still
        waiting (0 when the index holds exactly the scope's current versions). Stale rows
        still waiting are left out of the search's answer all the same."""
        if not self._engine.search_enabled:
            return 0
        deadline = anyio.current_time() + self.catch_up_s
        while await self.queued_versions(scope):
            if anyio.current_time() >= deadline:
                return await self.queued_versions(scope)
            try:
                indexed = await self.index_queued(scope=scope)
            except RowFault as fault:  # recorded failed, the scope's other work goes on
                await record(self._engine, fault, now_us())
                continue
            if not indexed:  # another replica holds it
                await anyio.sleep(0.05)
        return 0
