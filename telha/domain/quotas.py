"""Per-scope quotas and rate limits, pure (docs/operations.md, "Quotas and rate limits").

The limits of a scope are the ``[quotas]`` defaults with the scope's own values (set by
``telha scope set``) on top; ``0`` means unlimited, so an install that sets nothing sees no
change. The two slot shares are the exception: unless set, a scope may hold half (rounded
up) of the ``ingest.max_concurrent`` and ``server.max_event_streams`` slots
(:mod:`telha.domain.slots`); ``0`` lets it hold all of them.

The rate limit is a token bucket per API key: ``requests_per_second`` tokens are added per
second up to ``burst``, each request takes one, and a request finding none is told how long
until one is back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from telha.domain.errors import QuotaExceeded
from telha.domain.slots import fair_share

__all__ = [
    "LIMIT_KEYS",
    "PENDING_RETRY_AFTER_S",
    "Limits",
    "TokenBucket",
    "default_limits",
    "parse_limit",
    "pending_refusal",
]

#: ``Retry-After`` of a refusal for pending jobs (seconds): the backlog drains as workers
#: lease. A refusal for stored bytes has none: waiting does not free bytes.
PENDING_RETRY_AFTER_S = 1.0

#: The keys ``telha scope set`` accepts, as in ``[quotas]``.
LIMIT_KEYS = (
    "max_pending_jobs",
    "max_stored_bytes",
    "requests_per_second",
    "burst",
    "max_concurrent_ingests",
    "max_event_streams",
)
_INTEGER_KEYS = (
    "max_pending_jobs",
    "max_stored_bytes",
    "burst",
    "max_concurrent_ingests",
    "max_event_streams",
)
#: Largest value a limit may take (fits a signed 64-bit integer and a double exactly).
_MAX_VALUE = 2**53


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """A scope's limits; ``0`` in any field means unlimited.

    ``max_pending_jobs``: jobs in state ``pending``; ``max_stored_bytes``: raw uploads plus
    canonical text chunks, bytes; ``requests_per_second``: sustained ``/v1`` requests per
    second per API key; ``burst``: requests a key may make at once (``0`` with a rate set:
    ``ceil(requests_per_second)``, at least 1); ``max_concurrent_ingests``: slots of
    ``ingest.max_concurrent`` (``POST /v1/ingest`` in progress) the scope may hold at once;
    ``max_event_streams``: slots of ``server.max_event_streams`` (open event streams) it may
    hold at once — both per replica, and ``0`` there means every slot (no share).
    """

    max_pending_jobs: int = 0
    max_stored_bytes: int = 0
    requests_per_second: float = 0.0
    burst: int = 0
    max_concurrent_ingests: int = 0
    max_event_streams: int = 0

    def with_overrides(self, overrides: Mapping[str, float]) -> Limits:
        """These limits with a scope's own values (``{key: value}``) in their place."""
        fields = {k: getattr(self, k) for k in LIMIT_KEYS}
        for key, value in overrides.items():
            if key in fields:
                fields[key] = int(value) if key in _INTEGER_KEYS else float(value)
        return Limits(**fields)

    @property
    def bucket_size(self) -> int:
        """The burst a key's bucket holds (``burst``, or the rate rounded up, at least 1)."""
        return self.burst or max(1, math.ceil(self.requests_per_second))


def default_limits(quotas: object, *, ingest_slots: int, event_streams: int) -> Limits:
    """The limits of a scope with none of its own: the ``[quotas]`` values (``quotas``, a
    :class:`telha.config.QuotasConfig`: one attribute per :data:`LIMIT_KEYS` key), where a
    slot share that is not set (``None``) is the fair share (:func:`fair_share`) of its
    total: ``ingest_slots`` (``ingest.max_concurrent``) or ``event_streams``
    (``server.max_event_streams``)."""
    values = {key: getattr(quotas, key) for key in LIMIT_KEYS}
    if values["max_concurrent_ingests"] is None:
        values["max_concurrent_ingests"] = fair_share(ingest_slots)
    if values["max_event_streams"] is None:
        values["max_event_streams"] = fair_share(event_streams)
    return Limits(**values)


def parse_limit(key: str, value: str) -> float | None:
    """A ``telha scope set`` value for ``key``: a number ``>= 0`` (``0``: unlimited), an
    integer for every key but ``requests_per_second``; ``default`` (``None``) removes the
    scope's own value, so the ``[quotas]`` default applies again.

    :raises ValueError: unknown key, or a value that is not such a number (the message names
        the key).
    """
    if key not in LIMIT_KEYS:
        raise ValueError(f"unknown key {key!r}; one of {', '.join(LIMIT_KEYS)}")
    if value == "default":
        return None
    try:
        number = int(value) if key in _INTEGER_KEYS else float(value)
    except ValueError:
        kind = "an integer" if key in _INTEGER_KEYS else "a number"
        raise ValueError(f"{key} must be {kind} >= 0 or 'default', got {value!r}") from None
    if not math.isfinite(number) or not 0 <= number <= _MAX_VALUE:
        raise ValueError(f"{key} must be between 0 and {_MAX_VALUE}, got {value!r}")
    return float(number)


class TokenBucket:
    """One key's bucket: ``rate`` tokens per second (> 0) up to ``size``; starts full. The
    clock is the caller's (seconds, monotonic), so the rule is tested without sleeping."""

    __slots__ = ("_at", "_tokens", "rate", "size")

    def __init__(self, rate: float, size: int, now_s: float) -> None:
        self.rate = rate
        self.size = size
        self._tokens = float(size)
        self._at = now_s

    def take(self, now_s: float) -> float:
        """Take one token at ``now_s``: ``0.0`` when taken, else the seconds until one is
        back (nothing taken)."""
        elapsed = max(0.0, now_s - self._at)
        self._tokens = min(float(self.size), self._tokens + elapsed * self.rate)
        self._at = now_s
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate


def pending_refusal(pending: int, cap: int) -> QuotaExceeded:
    """The ``429 QUOTA_EXCEEDED`` of an ingest that would make a scope holding ``pending``
    pending jobs hold more than its ``max_pending_jobs`` (``cap``)."""
    return QuotaExceeded(
        f"max_pending_jobs: this scope has {pending} pending jobs, its quota of {cap};"
        " retry once some are leased",
        PENDING_RETRY_AFTER_S,
    )
