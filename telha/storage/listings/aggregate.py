"""The listing aggregate of a store (``store.listings``; docs/rest-api.md, "Listings")."""

from __future__ import annotations

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
from telha.storage.core.engine import EngineOps
from telha.storage.listings.queries import (
    job_family,
    list_jobs,
    list_sources,
    source_summary,
    version_parents,
)

__all__ = ["Listings"]


class Listings:
    """The listing aggregate of a store (``store.listings``; its contract:
    :class:`telha.storage.listings.role.ListStore`), each one
    :meth:`~telha.storage.core.engine.EngineOps.read` of ``engine``. A component the store
    composes, not a mixin."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def sources(self, scope: Scope, f: SourceFilter, page: Page) -> list[SourceSummary]:
        """See :func:`list_sources`."""
        return await self._engine.read(list_sources, scope, f, page)

    async def source(self, scope: Scope, source_id: bytes) -> SourceSummary | None:
        """See :func:`source_summary`."""
        return await self._engine.read(source_summary, scope, source_id)

    async def jobs(self, scope: Scope, f: JobFilter, page: Page) -> list[JobSummary]:
        """See :func:`list_jobs`."""
        return await self._engine.read(list_jobs, scope, f, page)

    async def job_family(self, scope: Scope, job_id: bytes) -> JobFamily | None:
        """See :func:`job_family`."""
        return await self._engine.read(job_family, scope, job_id)

    async def version_parents(self, scope: Scope, source_id: bytes) -> dict[int, VersionParent]:
        """See :func:`version_parents`."""
        return await self._engine.read(version_parents, scope, source_id)
