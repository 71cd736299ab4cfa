"""The listing aggregate's role (docs/rest-api.md, "Listings"): a store's ``listings``.
Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from typing import Protocol

from telha.domain.listings import (
    JobFamily,
    JobFilter,
    JobSummary,
    Page,
    SourceFilter,
    SourceSummary,
    VersionParent,
)
from telha.domain.model import Scope

__all__ = ["ListStore"]


class ListStore(Protocol):
    """The listings (docs/rest-api.md, "Listings"): a scope's sources and jobs, newest
    first, index-backed, a store's ``listings``
    (:class:`~telha.storage.listings.aggregate.Listings`)."""

    async def sources(self, scope: Scope, f: SourceFilter, page: Page) -> list[SourceSummary]:
        """The scope's sources matching ``f``, newest change first, after ``page.after``, at
        most ``page.limit``."""

    async def source(self, scope: Scope, source_id: bytes) -> SourceSummary | None:
        """One source as listed; ``None`` when ``scope`` has no job and no version of it."""

    async def jobs(self, scope: Scope, f: JobFilter, page: Page) -> list[JobSummary]:
        """The scope's jobs matching ``f``, newest first, after ``page.after``, at most
        ``page.limit``."""

    async def job_family(self, scope: Scope, job_id: bytes) -> JobFamily | None:
        """A job's parent and its children counted by state; ``None`` when the job is not
        in ``scope``."""

    async def version_parents(self, scope: Scope, source_id: bytes) -> dict[int, VersionParent]:
        """``{version tx: parent}`` of the source's published versions a child job wrote
        (an attachment's, an archive member's); others absent."""
