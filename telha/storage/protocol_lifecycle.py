"""The storage roles of the job lifecycle and of tenancy (docs/architecture.md, the storage roles):
retention, webhook subscriptions and deliveries, per-scope quotas. Part of
:class:`telha.storage.protocol.Storage`, which re-exports them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from telha.domain.model import Scope
from telha.storage.core.retention import JobKey, RetentionResult
from telha.storage.core.webhooks import DeliveryClaim, DeliveryResult, WebhookRecord

__all__ = ["QuotaStore", "RetentionStore", "WebhookStore"]


class RetentionStore(Protocol):
    """Job retention (docs/operations.md, "Retention";
    :mod:`telha.storage.core.retention`), a store's ``retention``: ``telha gc`` and the
    periodic collector."""

    async def remove_ended(
        self,
        *,
        before_us: int,
        after: JobKey | None = None,
        batch: int = 1000,
        dry_run: bool = False,
    ) -> RetentionResult:
        """Remove the jobs that ended before ``before_us`` (µs) and that no source version
        names, with their events, subscriptions and undelivered deliveries, ``batch`` per
        transaction (from ``after``, the key an earlier pass returned); then the raw
        uploads written before ``before_us`` that no remaining job and no version names.
        Versions and the graph are never touched. ``dry_run``: count only."""


class WebhookStore(Protocol):
    """Webhook subscriptions, signing secrets and deliveries (docs/operations.md,
    "Webhooks"; :mod:`telha.storage.core.webhooks`), a store's ``webhooks``. Times in µs."""

    async def add(
        self, scope: Scope, url: str, events: int, *, now_us: int
    ) -> tuple[bytes, str | None]:
        """Add a scope-wide subscription: its id, and the signing secret if made now."""

    async def remove(self, scope: Scope, webhook_id: bytes) -> bool:
        """Remove a subscription; ``False`` when the scope has none of that id."""

    async def subscriptions(self, scope: Scope) -> list[WebhookRecord]:
        """The scope's subscriptions, oldest first."""

    async def rotate_secret(self, scope: Scope, *, now_us: int) -> str:
        """Make or replace the scope's signing secret; returns it."""

    async def has_secret(self, scope: Scope) -> bool:
        """Whether the scope has a signing secret."""

    async def claim_deliveries(
        self, *, now_us: int, limit: int, claim_us: int
    ) -> list[DeliveryClaim]:
        """Claim up to ``limit`` due deliveries for one attempt each, for ``claim_us``."""

    async def finish_deliveries(self, results: Sequence[DeliveryResult]) -> None:
        """Delete delivered or abandoned deliveries, reschedule the others."""

    async def delivery_times(self) -> tuple[int | None, int | None]:
        """``(next due, oldest written)`` over the deliveries not yet made (µs, or ``None``)."""

    async def pending_deliveries(self, job_ids: Sequence[bytes]) -> int:
        """Deliveries not yet made of ``job_ids``."""


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
