"""The webhook aggregate of a store (``store.webhooks``; docs/operations.md, "Webhooks")."""

from __future__ import annotations

from collections.abc import Sequence

from telha.domain.model import Scope
from telha.storage.core.engine import EngineOps
from telha.storage.webhooks.subscriptions import (
    DeliveryClaim,
    DeliveryResult,
    WebhookRecord,
    add_webhook,
    claim,
    delivery_times,
    finish,
    has_secret,
    list_webhooks,
    pending_for_jobs,
    remove_webhook,
    rotate_secret,
)

__all__ = ["Webhooks"]


class Webhooks:
    """The webhook aggregate of a store (``store.webhooks``): each operation one
    transaction or one read of the engine's runners, over this module's functions
    (:class:`telha.storage.protocol.WebhookStore` is its contract). A component, not a
    mixin: the store composes it (:class:`~telha.storage.core.operations.SharedOps`)."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def add(
        self, scope: Scope, url: str, events: int, *, now_us: int
    ) -> tuple[bytes, str | None]:
        """See :func:`add_webhook`."""
        return await self._engine.transaction(
            "add webhook", add_webhook, scope, url, events, now_us
        )

    async def remove(self, scope: Scope, webhook_id: bytes) -> bool:
        """See :func:`remove_webhook`."""
        return await self._engine.transaction("remove webhook", remove_webhook, scope, webhook_id)

    async def subscriptions(self, scope: Scope) -> list[WebhookRecord]:
        """See :func:`list_webhooks`."""
        return await self._engine.read(list_webhooks, scope)

    async def rotate_secret(self, scope: Scope, *, now_us: int) -> str:
        """See :func:`rotate_secret`."""
        return await self._engine.transaction("rotate webhook secret", rotate_secret, scope, now_us)

    async def has_secret(self, scope: Scope) -> bool:
        """See :func:`has_secret`."""
        return await self._engine.read(has_secret, scope)

    async def claim_deliveries(
        self, *, now_us: int, limit: int, claim_us: int
    ) -> list[DeliveryClaim]:
        """See :func:`claim`."""
        return await self._engine.transaction("claim deliveries", claim, now_us, limit, claim_us)

    async def finish_deliveries(self, results: Sequence[DeliveryResult]) -> None:
        """See :func:`finish`."""
        if results:
            await self._engine.transaction("finish deliveries", finish, results)

    async def delivery_times(self) -> tuple[int | None, int | None]:
        """See :func:`delivery_times`."""
        return await self._engine.read(delivery_times)

    async def pending_deliveries(self, job_ids: Sequence[bytes]) -> int:
        """See :func:`pending_for_jobs`."""
        return await self._engine.read(pending_for_jobs, job_ids) if job_ids else 0
