"""The quota aggregate's role (docs/operations.md, "Quotas and rate limits"): a store's
``quotas``. Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from typing import Protocol

from telha.domain.model import Scope

__all__ = ["QuotaStore"]


class QuotaStore(Protocol):
    """Per-scope limits and usage (docs/operations.md, "Quotas and rate limits"): the REST
    front's quota checks and ``GET /v1/usage``, ``telha scope set``, the ``/metrics``
    gauge; a store's ``quotas``."""

    async def limits(self, scope: Scope) -> dict[str, float]:
        """The scope's own limits, ``{key: value}`` (``0``: unlimited); absent keys take the
        ``[quotas]`` defaults."""

    async def set_limit(self, scope: Scope, key: str, value: float | None) -> None:
        """Set the scope's own ``key`` (``None``: remove it, the default applies again)."""

    async def pending_jobs(self, scope: Scope, *, cap: int | None = None) -> int:
        """The scope's ``pending`` jobs, counted up to ``cap`` (all when ``None``)."""

    async def stored_bytes(self, scope: Scope) -> int:
        """The scope's stored raw and canonical bytes (kept incrementally, no scan)."""

    async def total_stored_bytes(self) -> int:
        """Stored bytes over every scope."""
