"""The pure stream-part state machine (telha.domain.streams): the fence by worker id and
lease generation, replay of the last partial, the seq and base checks; and moving rows built
before their transaction time to it (telha.domain.rows.at_tx)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telha.domain.errors import OutOfSync
from telha.domain.model import Continuation, LeaseRef, StreamPart
from telha.domain.projection import AmbiguityOut, EdgeOut, NodeOut, Projection, SpanOut
from telha.domain.rows import PENDING_TX, at_tx, build_rows
from telha.domain.streams import live_length, plan_part, single_shot_allowed

JOB = b"j" * 16


def _cont(worker: str = "w", gen: int = 3, next_seq: int = 2, length: int = 100) -> Continuation:
    return Continuation(worker, gen, next_seq, 7, b"b" * 16, length, 1, (b"n" * 16,))


def _part(
    seq: int, *, partial: bool = True, base: int = 0, worker: str = "w", gen: int = 3
) -> StreamPart:
    return StreamPart(LeaseRef(JOB, gen), worker, seq, partial, base, 1_000, 10)


def test_no_checkpoint_pins_at_seq_zero_on_no_text() -> None:
    plan = plan_part(None, _part(0))
    assert (plan.abandon, plan.live, plan.replay, plan.pin) == (False, None, False, True)
    with pytest.raises(OutOfSync, match="expected seq 0, got 1"):
        plan_part(None, _part(1))
    with pytest.raises(OutOfSync, match="built on 5 bytes; the stream holds 0"):
        plan_part(None, _part(0, base=5))


def test_own_checkpoint_continues_at_next_seq_on_its_length() -> None:
    c = _cont()
    plan = plan_part(c, _part(2, base=100))
    assert (plan.abandon, plan.live, plan.replay, plan.pin) == (False, c, False, False)
    final = plan_part(c, _part(2, partial=False, base=100))
    assert final.live == c and not final.replay
    with pytest.raises(OutOfSync, match="built on 99 bytes; the stream holds 100"):
        plan_part(c, _part(2, base=99))
    with pytest.raises(OutOfSync, match="expected seq 2, got 3"):
        plan_part(c, _part(3, base=100))
    with pytest.raises(OutOfSync, match="expected seq 2, got 0"):
        plan_part(c, _part(0))


def test_replay_of_the_last_partial_only() -> None:
    c = _cont()
    plan = plan_part(c, _part(1, base=123))  # a replay's base is not checked
    assert plan.replay and plan.live == c and not plan.pin and not plan.abandon
    with pytest.raises(OutOfSync, match="expected seq 2, got 1"):
        plan_part(c, _part(1, partial=False))  # a final part never replays


@pytest.mark.parametrize(("worker", "gen"), [("other", 3), ("w", 4)])
def test_another_leases_checkpoint_is_abandoned(worker: str, gen: int) -> None:
    c = _cont()
    plan = plan_part(c, _part(0, worker=worker, gen=gen))
    assert (plan.abandon, plan.live, plan.pin) == (True, None, True)
    with pytest.raises(OutOfSync, match="expected seq 0, got 1"):
        plan_part(c, _part(1, worker=worker, gen=gen))  # not a replay of another's stream
    assert live_length(c, worker, gen) == 0
    single_shot_allowed(c, worker, gen)


def test_single_shot_and_base_under_the_fence() -> None:
    c = _cont()
    assert live_length(c, "w", 3) == 100 and live_length(None, "w", 3) == 0
    single_shot_allowed(None, "w", 3)
    with pytest.raises(OutOfSync, match="a stream is open: expected seq 2, got 0"):
        single_shot_allowed(c, "w", 3)


@given(
    st.one_of(st.none(), st.builds(_cont, st.sampled_from(["w", "x"]), st.integers(1, 4))),
    st.integers(0, 4),
    st.booleans(),
    st.integers(0, 200),
)
def test_plan_is_one_of_the_outcomes(
    c: Continuation | None, seq: int, partial: bool, base: int
) -> None:
    part = _part(seq, partial=partial, base=base)
    own = c is not None and (c.worker_id, c.lease_generation) == ("w", 3)
    try:
        plan = plan_part(c, part)
    except OutOfSync:
        live = c if own else None
        assert not (own and partial and c is not None and seq + 1 == c.next_seq)
        assert seq != (live.next_seq if live else 0) or base != (live.length if live else 0)
        return
    assert plan.abandon == (c is not None and not own)
    if plan.replay:
        assert own and partial and c is not None and seq + 1 == c.next_seq
    elif plan.live is None:
        assert seq == 0 and base == 0
    else:
        assert own and c is not None and (seq, base) == (c.next_seq, c.length)


def test_at_tx_moves_every_tx_column() -> None:
    proj = Projection(
        b"hello world",
        [SpanOut(0, 5, "w"), SpanOut(6, 11, "w")],
        [NodeOut(("A",), b"{}", (0,)), NodeOut(("B", "C"), b"{}", (1,), b"i" * 16)],
        [EdgeOut("R", 0, 1)],
        ambiguities=[AmbiguityOut(0, "k", b"[]", 0.5, 0.5, "low")],
    )
    pending = build_rows(1, b"s" * 16, PENDING_TX, b"b" * 16, proj, {})
    rows = at_tx(pending, 42)
    direct = build_rows(1, b"s" * 16, 42, b"b" * 16, proj, {})
    assert rows.tx == 42 and rows.chunks == direct.chunks
    assert [r[2] for r in rows.nodes] == [42, 42] and [r[3] for r in rows.labels] == [42] * 3
    assert [r[2] for r in rows.edges] == [42] and [r[2] for r in rows.spans] == [42, 42]
    assert [r[2] for r in rows.ambiguities] == [42]
    strip = lambda table, col: [r[:col] + r[col + 1 :] for r in table]  # noqa: E731
    assert strip(rows.nodes, 2)[1] == strip(direct.nodes, 2)[1]  # the explicit id's row
    assert strip(rows.spans, 2)[1] == strip(direct.spans, 2)[1]  # linking the explicit id
