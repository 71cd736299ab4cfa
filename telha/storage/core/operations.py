"""The store's shared part, written once for both engines: each engine's store is
:class:`SharedOps` (every aggregate it composes, an engine overriding one with a subclass
that has a measured fast path: docs/architecture.md, "The storage seam") over its base (the
transaction and read runners).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cached_property

from telha.domain.row_faults import RowFault
from telha.storage.connectors.aggregate import Connectors
from telha.storage.core.engine import EngineOps
from telha.storage.core.failed_rows import record
from telha.storage.core.scan import Scan
from telha.storage.erasure.aggregate import Erasure
from telha.storage.jobs.aggregate import Jobs
from telha.storage.keys.aggregate import Keys
from telha.storage.listings.aggregate import Listings
from telha.storage.quotas.aggregate import StoreQuotas
from telha.storage.raw.aggregate import Raw
from telha.storage.reads.aggregate import Reads
from telha.storage.retention.aggregate import StoreRetention
from telha.storage.search.aggregate import Search
from telha.storage.versions.aggregate import Versions
from telha.storage.webhooks.aggregate import Webhooks

__all__ = ["SharedOps"]


class SharedOps(EngineOps):
    """Every operation of :class:`telha.storage.protocol.Storage`: the aggregates are
    attributes (``store.jobs``, ``store.versions``, ``store.reads``, ``store.search``, …),
    each a component made once, on first use, over this store's runners; what spans every
    aggregate (the whole-store snapshot, a bad row's record) is a method here."""

    @asynccontextmanager
    async def scan(self) -> AsyncIterator[Scan]:
        """A consistent read-only snapshot of every table for as long as the block runs
        (:meth:`~telha.storage.core.engine.EngineOps.snapshot`).

        :raises StorageError: the store cannot be read.
        """
        async with self.snapshot() as tx:
            yield Scan(tx)

    async def fail_row(self, fault: RowFault, *, now_us: int) -> bool:
        """Record ``fault``'s row failed with its reason in one transaction
        (:mod:`telha.storage.core.failed_rows`) and log it (``row_failed``: what, key,
        reason); ``False`` when nothing needed writing.

        :raises StorageError: the driver failed; nothing was written.
        """
        return await record(self, fault, now_us)

    @cached_property
    def connectors(self) -> Connectors:
        """The connector aggregate (:class:`~telha.storage.connectors.aggregate.Connectors`)."""
        return Connectors(self)

    @cached_property
    def erasure(self) -> Erasure:
        """The erasure aggregate (:class:`~telha.storage.erasure.aggregate.Erasure`)."""
        return Erasure(self)

    @cached_property
    def jobs(self) -> Jobs:
        """The job aggregate (:class:`~telha.storage.jobs.aggregate.Jobs`; an engine may return
        a subclass with its fast paths)."""
        return Jobs(self)

    @cached_property
    def keys(self) -> Keys:
        """The API key aggregate (:class:`~telha.storage.keys.aggregate.Keys`)."""
        return Keys(self)

    @cached_property
    def listings(self) -> Listings:
        """The listing aggregate (:class:`~telha.storage.listings.aggregate.Listings`)."""
        return Listings(self)

    @cached_property
    def quotas(self) -> StoreQuotas:
        """The quota aggregate (:class:`~telha.storage.quotas.aggregate.StoreQuotas`)."""
        return StoreQuotas(self)

    @cached_property
    def raw(self) -> Raw:
        """The raw upload aggregate (:class:`~telha.storage.raw.aggregate.Raw`)."""
        return Raw(self)

    @cached_property
    def reads(self) -> Reads:
        """The read aggregate (:class:`~telha.storage.reads.aggregate.Reads`)."""
        return Reads(self)

    @cached_property
    def retention(self) -> StoreRetention:
        """The retention aggregate (:class:`~telha.storage.retention.aggregate.StoreRetention`)."""
        return StoreRetention(self)

    @cached_property
    def search(self) -> Search:
        """The search aggregate (:class:`~telha.storage.search.aggregate.Search`)."""
        return Search(self)

    @cached_property
    def versions(self) -> Versions:
        """The version aggregate (:class:`~telha.storage.versions.aggregate.Versions`; an
        engine may return a subclass with its fast commit)."""
        return Versions(self)

    @cached_property
    def webhooks(self) -> Webhooks:
        """The webhook aggregate (:class:`~telha.storage.webhooks.aggregate.Webhooks`)."""
        return Webhooks(self)
