"""Pure retry policy of the job queue (docs/architecture.md, "A job's life"): failure kinds,
backoff, reasons.

No I/O and no clock: callers pass ``now_us`` and a random source, so the state machine can be
property-tested.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FAILURE_REASON_MAX_BYTES",
    "LOSS_KINDS",
    "PERMANENT_KINDS",
    "RETRYABLE_KINDS",
    "WORKER_KINDS",
    "Decide",
    "DecideLoss",
    "FailureDecision",
    "backoff_us",
    "decide_failure",
    "decide_loss",
    "format_reason",
    "parse_reason",
    "retry_after_us",
]

#: Kinds that dead-letter at once: the same input would fail the same way again.
PERMANENT_KINDS = frozenset({"corrupt_input", "unsupported_feature", "invalid_submission"})
#: Kinds that retry with backoff up to ``jobs.max_attempts``.
RETRYABLE_KINDS = frozenset({"transient", "resource_limit", "lease_expired", "worker_lost"})
#: Ways a job is lost with its worker: the worker's ``PollJobs`` stream ended while it
#: held the job, or its lease ran out. Each counts towards ``jobs.max_worker_losses``.
LOSS_KINDS = frozenset({"worker_lost", "lease_expired"})
#: Kinds a worker may report (``lease_expired`` and ``invalid_submission`` are core's own).
WORKER_KINDS = frozenset({"transient", "resource_limit", "corrupt_input", "unsupported_feature"})
#: ``failure_reason`` is ``"{kind}: {detail}"`` capped at this many UTF-8 bytes.
FAILURE_REASON_MAX_BYTES = 512


@dataclass(frozen=True, slots=True)
class FailureDecision:
    """What a failed attempt leads to: back to ``pending`` at ``available_at`` (µs), or ``dead``."""

    state: Literal["pending", "dead"]
    attempts: int
    available_at: int
    #: The job's ``failure_reason`` when the decision overrides the caller's (the poison cap:
    #: ``"resource_limit: worker lost N times"``); ``None`` keeps the caller's reason.
    reason: str | None = None


#: ``decide(kind, attempts_before)`` → the failed attempt's outcome (bound by the JobQueue).
Decide = Callable[[str, int], FailureDecision]
#: ``decide(kind, attempts_before, losses_before)`` → the outcome of losing a job with its
#: worker (``kind`` in :data:`LOSS_KINDS`; ``losses_before``: its earlier losses of either kind).
DecideLoss = Callable[[str, int, int], FailureDecision]


def backoff_us(attempts: int, *, base_ms: int, max_s: float, rng: random.Random) -> int:
    """Delay before retry number ``attempts`` (1 = first retry), in µs.

    Exponential with "equal jitter": ``d = min(max_s, base_ms · 2^(attempts-1))``, then a
    uniform draw from ``[d/2, d]``; never negative, never above ``max_s``.
    """
    ceiling_us = int(max_s * 1_000_000)
    exp = min(attempts - 1, 62)
    d = min(ceiling_us, base_ms * 1000 * (1 << max(exp, 0)))
    return d // 2 + rng.randint(0, d - d // 2) if d > 0 else 0


def decide_failure(
    kind: str,
    *,
    attempts_before: int,
    max_attempts: int,
    now_us: int,
    base_ms: int,
    max_s: float,
    rng: random.Random,
    min_delay_us: int = 0,
) -> FailureDecision:
    """The outcome of one failed attempt of a job that had ``attempts_before`` failures.

    Permanent kinds go ``dead`` at once; any other kind (unknown kinds count as transient)
    goes back to ``pending`` after :func:`backoff_us`, until the failed attempts reach
    ``max_attempts``, then ``dead``. ``min_delay_us`` (a worker's ``Retry-After``, see
    :func:`retry_after_us`) raises the delay to at least that, never above ``max_s``.
    """
    attempts = attempts_before + 1
    if kind in PERMANENT_KINDS or attempts >= max_attempts:
        return FailureDecision("dead", attempts, now_us)
    delay = backoff_us(attempts, base_ms=base_ms, max_s=max_s, rng=rng)
    delay = max(delay, min(min_delay_us, int(max_s * 1_000_000)))
    return FailureDecision("pending", attempts, now_us + delay)


def decide_loss(
    kind: str,
    *,
    attempts_before: int,
    losses_before: int,
    max_attempts: int,
    max_losses: int,
    now_us: int,
    base_ms: int,
    max_s: float,
    rng: random.Random,
) -> FailureDecision:
    """The outcome of losing a job with its worker: a failed attempt.

    - the loss that brings the job's losses (``worker_lost`` and ``lease_expired`` alike) to
      ``max_losses`` makes it ``dead`` with reason ``"resource_limit: worker lost N times"``
      (the poison cap: one input cannot crash the fleet forever);
    - otherwise, failed attempts reaching ``max_attempts`` make it ``dead`` as any failure;
    - otherwise ``pending``: at once for a job's first ``worker_lost`` (fast failover, no
      backoff), after :func:`backoff_us` of its attempts for later losses and lease expiries.
    """
    attempts = attempts_before + 1
    losses = losses_before + 1
    if losses >= max_losses:
        return FailureDecision(
            "dead",
            attempts,
            now_us,
            reason=format_reason("resource_limit", f"worker lost {losses} times"),
        )
    if attempts >= max_attempts:
        return FailureDecision("dead", attempts, now_us)
    if kind == "worker_lost" and losses == 1:
        return FailureDecision("pending", attempts, now_us)
    delay = backoff_us(attempts, base_ms=base_ms, max_s=max_s, rng=rng)
    return FailureDecision("pending", attempts, now_us + delay)


_RETRY_AFTER = re.compile(r"\(retry_after_s=(\d{1,9})\)$")


def retry_after_us(detail: str) -> int:
    """The least retry delay (µs) a worker asked for: ``detail`` ending in
    ``(retry_after_s=N)`` (``workers_common.failures.RETRY_AFTER_MARK``) gives ``N`` seconds;
    anything else 0."""
    m = _RETRY_AFTER.search(detail)
    return int(m.group(1)) * 1_000_000 if m else 0


def format_reason(kind: str, detail: str) -> str:
    """``"{kind}: {detail}"`` cut to at most 512 UTF-8 bytes, on a character boundary."""
    reason = f"{kind}: {detail}".encode()
    if len(reason) <= FAILURE_REASON_MAX_BYTES:
        return reason.decode()
    return reason[:FAILURE_REASON_MAX_BYTES].decode("utf-8", "ignore")


def parse_reason(reason: str, *, permanent: bool) -> tuple[str, str]:
    """Split a worker's ``failure_reason`` into ``(kind, detail)``.

    The kind prefix is authoritative when it is one a worker may report (:data:`WORKER_KINDS`);
    anything else is ``transient`` (or ``corrupt_input`` when the worker flagged it
    ``permanent``), with the whole text as detail.
    """
    kind, sep, detail = reason.partition(": ")
    if sep and kind in WORKER_KINDS:
        return kind, detail
    return ("corrupt_input" if permanent else "transient"), reason
