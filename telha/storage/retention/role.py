"""The retention aggregate's role (docs/operations.md, "Retention"): a store's
``retention``. Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from typing import Protocol

from telha.storage.retention.passes import JobKey, RetentionResult

__all__ = ["RetentionStore"]


class RetentionStore(Protocol):
    """Job retention (docs/operations.md, "Retention";
    :mod:`telha.storage.retention.passes`), a store's ``retention``: ``telha gc`` and the
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
