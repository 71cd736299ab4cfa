"""The fair slots (:mod:`telha.domain.slots`, docs/operations.md "Fair slots"): a scope holds
at most its share, refused ``429 QUOTA_EXCEEDED`` with ``Retry-After`` naming the share's key;
the global limit refuses ``503 UNAVAILABLE`` naming its config key; while a slot is free, a
scope holding none always gets it; releases give slots back and forget idle scopes."""

from __future__ import annotations

import pytest

from telha.domain.errors import QuotaExceeded, Unavailable
from telha.domain.slots import SLOT_RETRY_AFTER_S, ScopedSlots, fair_share


def _slots(total: int) -> ScopedSlots[str]:
    return ScopedSlots(
        total,
        noun="ingests in progress",
        total_key="ingest.max_concurrent",
        share_key="max_concurrent_ingests",
    )


def test_fair_share_is_half_rounded_up() -> None:
    assert [fair_share(n) for n in (1, 2, 3, 4, 16, 1000)] == [1, 1, 2, 2, 8, 500]


def test_a_scope_at_its_share_is_refused_and_another_scope_is_not() -> None:
    slots = _slots(4)
    share = fair_share(4)
    for _ in range(share):
        slots.take("a", share)
    with pytest.raises(QuotaExceeded) as caught:
        slots.take("a", share)
    assert "max_concurrent_ingests" in caught.value.message
    assert "ingest.max_concurrent" in caught.value.message
    assert caught.value.retry_after_s == SLOT_RETRY_AFTER_S
    assert (slots.held("a"), slots.in_use) == (2, 2)  # a refusal takes nothing
    slots.take("b", share)
    slots.take("b", share)
    assert (slots.held("b"), slots.in_use) == (2, 4)
    # Every slot held: a third scope is refused by the global limit.
    with pytest.raises(Unavailable) as full:
        slots.take("c", share)
    assert full.value.message == "4 ingests in progress (ingest.max_concurrent); retry shortly"
    # The scope's share is checked first: "a" is told about its own share.
    with pytest.raises(QuotaExceeded):
        slots.take("a", share)
    slots.release("b")
    slots.take("c", share)
    assert (slots.held("c"), slots.in_use) == (1, 4)


def test_with_one_slot_free_a_scope_holding_none_gets_it() -> None:
    for total in range(1, 12):
        slots = _slots(total)
        share = fair_share(total)
        with pytest.raises(QuotaExceeded if share < total else Unavailable):
            for _ in range(total + 1):
                slots.take("greedy", share)
        assert slots.held("greedy") == share
        if slots.in_use < total:
            slots.take("other", share)
            assert slots.held("other") == 1


def test_share_zero_or_over_the_total_is_every_slot() -> None:
    slots = _slots(3)
    assert (slots.cap(0), slots.cap(2), slots.cap(99)) == (3, 2, 3)
    for _ in range(3):
        slots.take("all", 0)
    with pytest.raises(Unavailable):
        slots.take("all", 0)
    with pytest.raises(Unavailable):  # no share of its own to blame: the global limit
        slots.take("all", 99)


def test_release_gives_back_and_forgets_idle_scopes() -> None:
    slots = _slots(2)
    slots.take("a", 1)
    slots.release("a")
    assert (slots.held("a"), slots.in_use) == (0, 0)
    assert slots._held == {}  # no counter kept for a scope holding nothing
    with pytest.raises(ValueError, match="not taken"):
        slots.release("a")
    with pytest.raises(ValueError, match=r"ingest\.max_concurrent"):
        _slots(0)
