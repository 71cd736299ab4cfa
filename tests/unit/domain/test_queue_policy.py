"""The pure retry policy (telha/domain/policy.py) as a state machine, property-tested."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from telha.domain.policy import (
    PERMANENT_KINDS,
    backoff_us,
    decide_failure,
    decide_loss,
    format_reason,
    parse_reason,
)

kinds = st.sampled_from(
    ["transient", "resource_limit", "lease_expired", "weird", *sorted(PERMANENT_KINDS)]
)


@given(st.integers(1, 80), st.integers(0, 10_000), st.floats(0, 3600), st.integers(0, 2**32))
def test_backoff_bounded_and_jittered(attempts: int, base_ms: int, max_s: float, seed: int) -> None:
    d = backoff_us(attempts, base_ms=base_ms, max_s=max_s, rng=random.Random(seed))
    ceiling = min(int(max_s * 1_000_000), base_ms * 1000 * 2 ** min(attempts - 1, 62))
    assert ceiling // 2 <= d <= ceiling


@given(st.lists(kinds, min_size=1, max_size=12), st.integers(1, 6), st.integers(0, 2**32))
def test_failure_sequence(kinds_seen: list[str], max_attempts: int, seed: int) -> None:
    """Attempts count up by one per failure; the first failure that is permanent or brings
    attempts to max_attempts is the one that makes the job dead, and every earlier one sends
    it back to pending, available later. (Dead is terminal because storage accepts no
    failure for a job that is not leased: see tests/integration/test_storage_contract.py.)"""
    rng = random.Random(seed)
    dead_at = next(
        (i for i, k in enumerate(kinds_seen) if k in PERMANENT_KINDS or i + 1 >= max_attempts),
        None,
    )
    outcomes = []
    now = 1_000_000
    for attempts, kind in enumerate(kinds_seen[: None if dead_at is None else dead_at + 1]):
        d = decide_failure(
            kind,
            attempts_before=attempts,
            max_attempts=max_attempts,
            now_us=now,
            base_ms=10,
            max_s=1.0,
            rng=rng,
        )
        assert d.attempts == attempts + 1 and d.reason is None
        if d.state == "pending":
            assert now <= d.available_at <= now + 1_000_000
        outcomes.append(d.state)
        now += 1
    expected = len(outcomes) - (dead_at is not None)
    assert outcomes == ["pending"] * expected + ["dead"] * (dead_at is not None)
    assert len(outcomes) == (len(kinds_seen) if dead_at is None else dead_at + 1)


@given(st.text(max_size=700))
def test_reasons_capped_on_char_boundary(detail: str) -> None:
    reason = format_reason("transient", detail)
    assert len(reason.encode()) <= 512 and reason.startswith("transient: ")
    assert parse_reason(reason, permanent=False)[0] == "transient"


def test_parse_reason() -> None:
    assert parse_reason("corrupt_input: bad bytes", permanent=True) == (
        "corrupt_input",
        "bad bytes",
    )
    assert parse_reason("boom", permanent=False) == ("transient", "boom")
    assert parse_reason("boom", permanent=True) == ("corrupt_input", "boom")
    assert parse_reason("madeup: x", permanent=False) == ("transient", "madeup: x")


@given(
    st.lists(st.sampled_from(["worker_lost", "lease_expired", "transient"]), min_size=1),
    st.integers(1, 8),
    st.integers(1, 5),
    st.integers(0, 2**32),
)
def test_loss_sequence(
    kinds_seen: list[str], max_attempts: int, max_losses: int, seed: int
) -> None:
    """Losses (worker_lost, lease_expired) and other failures each count an attempt; the
    job is dead exactly when losses reach max_losses (as ``resource_limit: worker lost N
    times``) or attempts reach max_attempts; a first worker_lost is retried at once."""
    rng = random.Random(seed)
    losses, now = 0, 5_000_000
    for before, kind in enumerate(kinds_seen):
        common = {"attempts_before": before, "max_attempts": max_attempts, "now_us": now,
                  "base_ms": 100, "max_s": 5.0, "rng": rng}  # fmt: skip
        if kind == "transient":
            d = decide_failure(kind, **common)  # type: ignore[arg-type]
        else:
            d = decide_loss(kind, losses_before=losses, max_losses=max_losses, **common)  # type: ignore[arg-type]
            losses += 1
        attempts = before + 1
        assert d.attempts == attempts
        if kind != "transient" and losses >= max_losses:
            assert d.state == "dead" and d.reason == f"resource_limit: worker lost {losses} times"
            break
        if attempts >= max_attempts:
            assert d.state == "dead" and d.reason is None
            break
        assert d.state == "pending"
        if kind == "worker_lost" and losses == 1:
            assert d.available_at == now
        else:
            assert now < d.available_at <= now + 5_000_000
