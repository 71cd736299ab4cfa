"""Quotas and rate limits at the REST front (docs/operations.md, "Quotas and rate limits").

:class:`Quotas` answers, per request, whether the API key's token bucket has a token
(``429 RATE_LIMITED`` with ``Retry-After`` otherwise) and, per ingest, whether the scope's
pending jobs and stored bytes are under its limits (``429 QUOTA_EXCEEDED``). A scope's
limits are read from the store at most every :data:`LIMITS_TTL_S` seconds, so a ``telha
scope set`` takes effect within that time. Buckets live in this process (one set per
replica), at most :data:`MAX_BUCKETS` of them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from prometheus_client import Counter

from telha.auth import hash_key
from telha.domain.errors import QuotaExceeded, RateLimited
from telha.domain.model import Scope
from telha.domain.quotas import PENDING_RETRY_AFTER_S, Limits, TokenBucket, pending_refusal
from telha.metrics import Metrics
from telha.storage.protocol import QuotaStore

__all__ = ["LIMITS_TTL_S", "MAX_BUCKETS", "PENDING_RETRY_AFTER_S", "Quotas"]

#: Seconds a scope's limits are remembered before they are read again.
LIMITS_TTL_S = 10.0
#: Token buckets kept at most; the least recently used is dropped first (it starts full
#: again when its key returns, which only ever admits more).
MAX_BUCKETS = 10_000


class Quotas:
    """The limits of each scope and the rate limit of each key, over ``store`` (the store's
    quota aggregate, ``store.quotas``).

    ``defaults``: the limits of a scope with none of its own
    (:func:`telha.domain.quotas.default_limits`); ``clock`` is monotonic seconds (injected
    for tests)."""

    def __init__(
        self,
        store: QuotaStore,
        defaults: Limits,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._defaults = defaults
        self._clock = clock
        self._limits: dict[Scope, tuple[Limits, float]] = {}
        self._buckets: OrderedDict[bytes, TokenBucket] = OrderedDict()
        self._stored_total = 0.0
        self._refusals = Counter(
            "telha_quota_refusals",
            "Requests refused by a quota or rate limit, by error code (no scope is named)",
            ["code"],
            registry=metrics.registry,
        )
        for code in ("QUOTA_EXCEEDED", "RATE_LIMITED"):
            self._refusals.labels(code)
        metrics.watch_gauge(
            "telha_stored_bytes",
            "Raw and canonical bytes stored over every scope (as of the last scrape)",
            lambda: self._stored_total,
        )

    async def limits(self, scope: Scope) -> Limits:
        """The scope's limits: the ``[quotas]`` defaults with its own values on top."""
        now = self._clock()
        hit = self._limits.get(scope)
        if hit is not None and hit[1] > now:
            return hit[0]
        limits = self._defaults.with_overrides(await self._store.limits(scope))
        if len(self._limits) >= MAX_BUCKETS:
            self._limits.clear()
        self._limits[scope] = (limits, now + LIMITS_TTL_S)
        return limits

    async def admit(self, key: str, scope: Scope) -> None:
        """Take a token from ``key``'s bucket (a no-op while the scope has no rate).

        :raises RateLimited: the bucket is empty; ``retry_after_s`` until a token is back.
        """
        limits = await self.limits(scope)
        if limits.requests_per_second <= 0:
            return
        digest = hash_key(key)
        now = self._clock()
        bucket = self._buckets.get(digest)
        if (
            bucket is None
            or bucket.rate != limits.requests_per_second
            or bucket.size != limits.bucket_size
        ):
            bucket = TokenBucket(limits.requests_per_second, limits.bucket_size, now)
            self._buckets[digest] = bucket
            if len(self._buckets) > MAX_BUCKETS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(digest)
        wait = bucket.take(now)
        if wait > 0:
            self._refusals.labels("RATE_LIMITED").inc()
            raise RateLimited(
                f"over this scope's rate limit ({limits.requests_per_second:g} requests/s,"
                f" burst {limits.bucket_size}); retry after {wait:.3f} s",
                wait,
            )

    async def check_ingest(self, scope: Scope, makes_job: bool) -> int:
        """Refuse an ingest when the scope's stored bytes are over ``max_stored_bytes`` or,
        for a request that would enqueue a job (``makes_job``), its pending jobs are at
        ``max_pending_jobs``. Returns that ``max_pending_jobs`` for a request that makes a
        job (``0``: unlimited, or no job), which the enqueue holds again in its own
        transaction: this early check refuses before an upload is stored, but two requests
        can pass it together (:func:`telha.storage.jobs.lifecycle.enqueue_job`).

        :raises QuotaExceeded: the message names the quota, the usage and the limit (the
            caller counts it, :meth:`count_refusal`, as it counts the enqueue's).
        """
        limits = await self.limits(scope)
        if limits.max_stored_bytes > 0:
            stored = await self._store.stored_bytes(scope)
            if stored > limits.max_stored_bytes:
                raise QuotaExceeded(
                    f"max_stored_bytes: this scope stores {stored} bytes, over its quota of"
                    f" {limits.max_stored_bytes}"
                )
        if makes_job and limits.max_pending_jobs > 0:
            cap = limits.max_pending_jobs
            pending = await self._store.pending_jobs(scope, cap=cap)
            if pending >= cap:
                raise pending_refusal(pending, cap)
        return limits.max_pending_jobs if makes_job else 0

    def count_refusal(self) -> None:
        """Count a ``429 QUOTA_EXCEEDED`` (``telha_quota_refusals_total``): the ingest route
        calls it for :meth:`check_ingest`'s refusals and the enqueue transaction's alike."""
        self._refusals.labels("QUOTA_EXCEEDED").inc()

    async def refresh_gauges(self) -> None:
        """Read the stored bytes over every scope for ``telha_stored_bytes``."""
        self._stored_total = float(await self._store.total_stored_bytes())
