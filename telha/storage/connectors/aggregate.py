"""The connector aggregate of a store (``store.connectors``): registered connectors, the
items they created and their sync runs (docs/connectors.md), each operation one transaction
or one read of the engine's runners over :mod:`telha.storage.connectors.registry`,
:mod:`telha.storage.connectors.sync_runs` and :mod:`telha.storage.connectors.sync_pages`
(:class:`telha.storage.connectors.role.ConnectorStore` is its contract). Times in µs."""

from __future__ import annotations

from collections.abc import Sequence

from telha.domain.connectors import ConnectorItem, ConnectorRecord
from telha.domain.model import NewJob, Scope
from telha.storage.connectors import registry as c
from telha.storage.connectors import sync_runs as r
from telha.storage.connectors.sync_pages import PageApply, PageOutcome, apply_page
from telha.storage.core.engine import EngineOps

__all__ = ["Connectors"]


class Connectors:
    """A component the store composes (:class:`~telha.storage.core.operations.SharedOps`),
    not a mixin: ``engine`` runs each operation."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def add(self, scope: Scope, connector: ConnectorRecord) -> None:
        """See :func:`telha.storage.connectors.registry.add_connector`."""
        await self._engine.transaction("add connector", c.add_connector, scope, connector)

    async def listed(self, scope: Scope) -> list[ConnectorRecord]:
        """See :func:`telha.storage.connectors.registry.list_connectors`."""
        return await self._engine.read(c.list_connectors, scope)

    async def get(self, scope: Scope, connector_id: bytes) -> ConnectorRecord | None:
        """See :func:`telha.storage.connectors.registry.get_connector`."""
        return await self._engine.read(c.get_connector, scope, connector_id)

    async def remove(self, scope: Scope, connector_id: bytes, *, now_us: int) -> bool:
        """See :func:`telha.storage.connectors.registry.remove_connector`."""
        return await self._engine.transaction(
            "remove connector", c.remove_connector, scope, connector_id, now_us
        )

    async def record_item(self, scope: Scope, item: ConnectorItem) -> None:
        """See :func:`telha.storage.connectors.registry.record_item`."""
        await self._engine.transaction("record connector item", c.record_item, scope, item)

    async def find_item(
        self, scope: Scope, connector_id: bytes, external_id: str
    ) -> ConnectorItem | None:
        """See :func:`telha.storage.connectors.registry.find_item`."""
        return await self._engine.read(c.find_item, scope, connector_id, external_id)

    async def items(self, scope: Scope, connector_id: bytes) -> list[ConnectorItem]:
        """See :func:`telha.storage.connectors.registry.connector_items`."""
        return await self._engine.read(c.connector_items, scope, connector_id)

    async def start_sync_run(
        self, scope: Scope, job: NewJob, *, now_us: int, every_us: int | None = None
    ) -> bytes | None:
        """See :func:`telha.storage.connectors.sync_runs.start_run`."""
        return await self._engine.transaction(
            "start sync run", r.start_run, scope, job, now_us, every_us
        )

    async def scheduled(self) -> list[tuple[Scope, ConnectorRecord]]:
        """See :func:`telha.storage.connectors.sync_runs.scheduled`."""
        return await self._engine.read(r.scheduled)

    async def apply_sync_page(self, p: PageApply) -> PageOutcome:
        """See :func:`telha.storage.connectors.sync_pages.apply_page`."""
        return await self._engine.transaction("apply sync page", apply_page, p)

    async def sync_runs(
        self, scope: Scope, connector_id: bytes, *, limit: int = 50
    ) -> Sequence[r.RunRow]:
        """See :func:`telha.storage.connectors.sync_runs.list_runs`."""
        return await self._engine.read(r.list_runs, scope, connector_id, limit)
