"""The search aggregate's role (docs/rest-api.md, "Search" and "Locate a quote"): a
store's ``search``. Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from typing import Protocol

from telha.domain.model import Scope
from telha.domain.search_query import Quote, Term
from telha.storage.search.queries import Filters, Located, SearchHit

__all__ = ["SearchStore"]


class SearchStore(Protocol):
    """Full-text search and quote location over the scope's current versions
    (docs/rest-api.md, "Search"), and the index's writer: a store's ``search``
    (:class:`~telha.storage.search.aggregate.Search`)."""

    @property
    def enabled(self) -> bool:
        """``[search] enabled``: the index is kept."""

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
        """The scope's current spans matching every term, best first, ``limit`` from
        ``offset`` (on SQLite a query matching more than ``rank_window`` spans (> 0) ranks
        the newest of them only: :func:`telha.storage.search.queries.search`), and the versions
        whose index rows still wait (:meth:`queued_versions`) when it answered:
        ``(hits, waiting)``."""

    async def locate(
        self,
        scope: Scope,
        quote: Quote,
        *,
        source_id: bytes | None,
        limit: int,
        principals: tuple[str, ...] | None = None,
    ) -> list[Located]:
        """Every occurrence of ``quote`` in the scope's current versions (with
        ``principals``: of the sources whose ACL admits one of them), at most ``limit``
        (:func:`telha.storage.search.queries.locate`)."""

    async def index_queued(self, *, scope: Scope | None = None, limit: int = 2000) -> int:
        """One batch (at most ``limit`` rows) of the index's waiting work, of ``scope`` or
        any; returns the rows deleted or written, 0 when nothing waits
        (:meth:`telha.storage.search.aggregate.Search.index_queued`)."""

    async def queued_versions(self, scope: Scope | None = None) -> int:
        """Versions whose index rows wait to be written or deleted, of ``scope`` or all."""
