"""The quota aggregate of a store (``store.quotas``; docs/operations.md, "Quotas and rate
limits")."""

from __future__ import annotations

from telha.domain.model import Scope
from telha.storage.core.engine import EngineOps
from telha.storage.quotas.limits import (
    pending_jobs,
    scope_limits,
    set_scope_limit,
    stored_bytes,
    total_stored_bytes,
)

__all__ = ["StoreQuotas"]


class StoreQuotas:
    """The quota aggregate of a store (``store.quotas``): a component the store composes
    (:class:`~telha.storage.core.operations.SharedOps`) over its runners;
    :class:`telha.storage.protocol.QuotaStore` is its contract."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def limits(self, scope: Scope) -> dict[str, float]:
        """See :func:`scope_limits`."""
        return await self._engine.read(scope_limits, scope)

    async def set_limit(self, scope: Scope, key: str, value: float | None) -> None:
        """See :func:`set_scope_limit`."""
        await self._engine.transaction("set scope limit", set_scope_limit, scope, key, value)

    async def pending_jobs(self, scope: Scope, *, cap: int | None = None) -> int:
        """See :func:`pending_jobs`."""
        return await self._engine.read(pending_jobs, scope, cap)

    async def stored_bytes(self, scope: Scope) -> int:
        """See :func:`stored_bytes`."""
        return await self._engine.read(stored_bytes, scope)

    async def total_stored_bytes(self) -> int:
        """See :func:`total_stored_bytes`."""
        return await self._engine.read(total_stored_bytes)
