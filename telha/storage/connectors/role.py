"""The connector role of the storage seam (docs/connectors.md;
:mod:`telha.storage.connectors.registry`). Times in µs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from telha.domain.connectors import ConnectorItem, ConnectorRecord
from telha.domain.model import NewJob, Scope
from telha.storage.connectors.sync_pages import PageApply, PageOutcome
from telha.storage.connectors.sync_runs import RunRow

__all__ = ["ConnectorStore"]


class ConnectorStore(Protocol):
    """Registered connectors, the items they created and their sync runs: a store's
    ``connectors``."""

    async def add(self, scope: Scope, connector: ConnectorRecord) -> None:
        """Register ``connector`` in ``scope``."""

    async def listed(self, scope: Scope) -> list[ConnectorRecord]:
        """The scope's connectors not removed, oldest first."""

    async def get(self, scope: Scope, connector_id: bytes) -> ConnectorRecord | None:
        """A connector of ``scope`` not removed, or ``None``."""

    async def remove(self, scope: Scope, connector_id: bytes, *, now_us: int) -> bool:
        """Mark a connector removed (its sources and items stay); ``False``: no such one."""

    async def record_item(self, scope: Scope, item: ConnectorItem) -> None:
        """Write or replace the row of ``item``'s (connector, external id)."""

    async def find_item(
        self, scope: Scope, connector_id: bytes, external_id: str
    ) -> ConnectorItem | None:
        """The item row of (connector, external id), or ``None``."""

    async def items(self, scope: Scope, connector_id: bytes) -> list[ConnectorItem]:
        """Every item row of a connector (retired ones too), by external id."""

    async def start_sync_run(
        self, scope: Scope, job: NewJob, *, now_us: int, every_us: int | None = None
    ) -> bytes | None:
        """Enqueue a run job; ``None`` when the connector has one pending or leased (or,
        with ``every_us``, started one less than that ago)."""

    async def scheduled(self) -> list[tuple[Scope, ConnectorRecord]]:
        """Every live connector with a schedule, across scopes."""

    async def apply_sync_page(self, p: PageApply) -> PageOutcome:
        """Apply one page of a held run's report in one transaction (the last one retires
        and completes the run); what to read next and the counts so far.

        :raises StaleLease: the run is not held under the page's lease.
        :raises OutOfSync: a page out of sequence.
        """

    async def sync_runs(
        self, scope: Scope, connector_id: bytes, *, limit: int = 50
    ) -> Sequence[RunRow]:
        """The connector's runs, newest first."""
