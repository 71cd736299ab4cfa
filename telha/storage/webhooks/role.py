"""The webhook aggregate's role (docs/operations.md, "Webhooks"): a store's ``webhooks``.
Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from telha.domain.model import Scope
from telha.storage.webhooks.subscriptions import DeliveryClaim, DeliveryResult, WebhookRecord

__all__ = ["WebhookStore"]


class WebhookStore(Protocol):
    """Webhook subscriptions, signing secrets and deliveries (docs/operations.md,
    "Webhooks"; :mod:`telha.storage.webhooks.subscriptions`), a store's ``webhooks``. Times
    in µs."""

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
