"""The erasure's node plan (telha/domain/erasure.py ``plan_nodes``), property-tested over
generated node histories: a node whose every version and span is erased is hidden, a node
another source still stands for is trimmed, never both; every version an erased version wrote
is scrubbed; the plan does not depend on the order rows are read in."""

from __future__ import annotations

import random
from dataclasses import dataclass

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from telha.domain.erasure import Link, NodeRow, plan_nodes

SCOPE_ID = 7
SOURCES = [bytes([i]) * 16 for i in range(1, 4)]
#: The erasure's own transaction time: after every version.
ERASE_TX = 10_000


@dataclass
class History:
    rows: list[NodeRow]
    erased: set[tuple[bytes, int]]
    links: dict[bytes, list[Link]]


@st.composite
def histories(draw: st.DrawFn) -> History:
    """A few nodes, each written by one to four versions of the sources (tx increasing); a
    random set of the versions is erased; surviving versions may link nodes by span rows."""
    versions = sorted(
        draw(
            st.sets(
                st.tuples(st.sampled_from(SOURCES), st.integers(1, 999)), min_size=1, max_size=8
            )
        ),
        key=lambda v: v[1],
    )
    versions = list({tx: (s, tx) for s, tx in versions}.values())  # one version per tx
    erased = {v for v in versions if draw(st.booleans())}
    rows: list[NodeRow] = []
    links: dict[bytes, list[Link]] = {}
    for n in range(draw(st.integers(1, 5))):
        node_id = bytes([100 + n]) * 16
        written = sorted(
            draw(st.lists(st.sampled_from(versions), min_size=1, max_size=4, unique=True)),
            key=lambda v: v[1],
        )
        for i, (source, tx) in enumerate(written):
            tx_to = written[i + 1][1] if i + 1 < len(written) else None
            prov = msgspec.json.encode([[tx % 50, tx % 50 + 3]])
            props = msgspec.json.encode({"v": tx})
            rows.append(
                NodeRow(node_id, tx, tx_to, source, '["N"]', props, prov, None, None, False)
            )
        survivors = [v for v in versions if v not in erased]
        for source, tx in (
            draw(st.lists(st.sampled_from(survivors), max_size=2)) if survivors else []
        ):
            links.setdefault(node_id, []).append((source, tx, 0, 4))
    return History(rows, erased, links)


def outcome(plan_inserts: list[tuple[object, ...]], node_id: bytes) -> list[bool]:
    """The ``erased`` flags of the versions the plan appends for ``node_id``."""
    return [bool(row[-1]) for row in plan_inserts if row[1] == node_id]


@settings(max_examples=300, deadline=None)
@given(histories())
def test_hidden_or_trimmed_never_both(h: History) -> None:
    plan = plan_nodes(SCOPE_ID, ERASE_TX, h.erased, h.rows, h.links)
    nodes = sorted({r.node_id for r in h.rows})
    assert plan.hidden + plan.trimmed == len(nodes)
    hidden = trimmed = 0
    for node_id in nodes:
        mine = [r for r in h.rows if r.node_id == node_id]
        gone = all((r.source_id, r.tx_from) in h.erased for r in mine)
        kept_by_link = bool(h.links.get(node_id))
        flags = outcome(plan.inserts, node_id)
        assert len(flags) <= 1 and plan.close.count(node_id) == len(flags)
        current = next(r for r in mine if r.tx_to is None)
        if gone and not kept_by_link:
            hidden += 1  # deleted: a closing version, flagged erased, with no content
            assert flags == [True]
            [row] = [r for r in plan.inserts if r[1] == node_id]
            assert row[2] == ERASE_TX and row[4] == b"{}" and row[5] == b"[]"
        else:
            trimmed += 1  # kept: a new current version only when the current one was erased
            current_erased = (current.source_id, current.tx_from) in h.erased
            assert flags == ([False] if current_erased else [])
            for row in plan.inserts:
                if row[1] == node_id:
                    source, prov = row[6], msgspec.json.decode(row[5])
                    assert prov and {p[2] for p in prov} == {prov[0][2]}
                    assert (source, prov[0][2]) not in h.erased  # a survivor's spans
                    assert row[4] != b"{}"  # a survivor's content
        assert not (gone and not kept_by_link and flags == [False])
    assert (hidden, trimmed) == (plan.hidden, plan.trimmed)
    # Every version an erased version wrote is scrubbed, and nothing else.
    assert sorted(plan.scrub) == sorted(
        (r.node_id, r.tx_from) for r in h.rows if (r.source_id, r.tx_from) in h.erased
    )
    # Labels are written exactly for the kept nodes' new versions.
    assert sorted(lb[2] for lb in plan.labels) == sorted(
        row[1] for row in plan.inserts if not row[-1]
    )


@settings(max_examples=150, deadline=None)
@given(histories(), st.randoms(use_true_random=False))
def test_plan_is_deterministic(h: History, rnd: random.Random) -> None:
    first = plan_nodes(SCOPE_ID, ERASE_TX, h.erased, h.rows, h.links)
    shuffled = list(h.rows)
    rnd.shuffle(shuffled)
    assert plan_nodes(SCOPE_ID, ERASE_TX, set(h.erased), shuffled, h.links) == first
    assert plan_nodes(SCOPE_ID, ERASE_TX, h.erased, h.rows, h.links) == first


def test_a_node_already_hidden_is_not_closed_again() -> None:
    node, source = b"\x01" * 16, SOURCES[0]
    rows = [
        NodeRow(node, 5, 9, source, '["N"]', b'{"a":1}', b"[[0,1]]", None, None, False),
        NodeRow(node, 9, None, source, '["N"]', b"{}", b"[]", None, None, True),
    ]
    plan = plan_nodes(SCOPE_ID, ERASE_TX, {(source, 5)}, rows, {})
    assert (plan.hidden, plan.trimmed, plan.close, plan.inserts) == (1, 0, [], [])
    assert plan.scrub == [(node, 5)]


def test_a_trimmed_node_takes_the_latest_survivor_content_and_spans() -> None:
    node, keep, gone = b"\x02" * 16, SOURCES[0], SOURCES[1]
    rows = [
        NodeRow(node, 5, 8, keep, '["P"]', b'{"name":"Ann"}', b"[[0,3]]", 1, 2, False),
        NodeRow(node, 8, None, gone, '["P"]', b'{"name":"Ann X"}', b"[[4,9]]", None, None, False),
    ]
    plan = plan_nodes(SCOPE_ID, ERASE_TX, {(gone, 8)}, rows, {})
    assert (plan.hidden, plan.trimmed, plan.close, plan.scrub) == (0, 1, [node], [(node, 8)])
    assert plan.inserts == [
        (SCOPE_ID, node, ERASE_TX, '["P"]', b'{"name":"Ann"}', b"[[0,3,5]]", keep, 1, 2, False)
    ]
    assert plan.labels == [(SCOPE_ID, "P", node, ERASE_TX)]
