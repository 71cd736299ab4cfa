"""Stable node identity (telha.domain.identity, docs/architecture.md "Versions and node
identity"): match keys, their assignment and deterministic edge ids."""

from __future__ import annotations

from collections import deque

import msgspec

from telha.domain.identity import (
    DEFERRED,
    ROOT_LABELS,
    assign,
    deferred_keys,
    edge_id,
    is_root,
    labels_part,
    match_keys,
    stored_key,
)
from telha.domain.projection import AmbiguityOut, NodeOut, Projection, SpanOut
from telha.domain.rows import Match, build_rows


def _doc(*paragraphs: str, title: str = "Title") -> Projection:
    """A DOCUMENT root with a SECTION and one PARAGRAPH per text, each spanning its text."""
    text = b""
    spans: list[SpanOut] = []
    for piece in (title, *paragraphs):
        if text:
            text += b"\n\n"
        spans.append(SpanOut(len(text), len(text) + len(piece.encode()), "paragraph"))
        text += piece.encode()
    nodes = [NodeOut(("DOCUMENT",), b'{"title":"%s"}' % title.encode(), ())]
    nodes.append(NodeOut(("SECTION",), b"{}", (0,)))
    nodes += [NodeOut(("PARAGRAPH",), b"{}", (i,)) for i in range(1, len(spans))]
    return Projection(text, spans, nodes)


def test_keys_depend_on_content_not_position() -> None:
    a = match_keys(_doc("Alpha.", "Beta."))
    b = match_keys(_doc("Inserted first.", "Alpha.", "Beta."))
    assert a[2] == b[3] and a[3] == b[4]  # text before moved: same keys
    c = match_keys(_doc("Alpha.", "Beta, edited."))
    assert a[2] == c[2] and a[3] != c[3]
    moved = match_keys(_doc("Beta.", "Alpha."))
    assert {a[2], a[3]} == {moved[2], moved[3]}


def test_root_key_is_its_labels_only() -> None:
    a = match_keys(_doc("Alpha.", title="One"))
    b = match_keys(_doc("Other.", title="Two"))
    assert a[0] == b[0] and a[1] != b[1]
    assert is_root(["DOCUMENT"]) and not is_root(["PARAGRAPH"]) and "FILE" in ROOT_LABELS


def test_keys_without_spans_use_properties_and_worker_ids_have_none() -> None:
    proj = Projection(
        b"",
        [],
        [
            NodeOut(("TAG",), b'{"n":1}', ()),
            NodeOut(("TAG",), b'{"n":2}', ()),
            NodeOut(("TAG",), b'{"n":1}', (), node_id=b"\x01" * 16),
        ],
    )
    keys = match_keys(proj)
    assert keys[0] != keys[1] and keys[2] is None


def test_assign_takes_ids_in_order_per_key_and_each_once() -> None:
    k1, k2 = b"k" * 16, b"j" * 16
    cands = {k1: deque([b"a" * 16, b"b" * 16]), k2: deque([b"c" * 16])}
    assert assign([k1, k2, k1, k1, None, k2], cands) == [
        b"a" * 16, b"c" * 16, b"b" * 16, None, None, None,
    ]  # fmt: skip


def test_edge_ids_are_deterministic_and_distinguish_occurrences() -> None:
    src, a, b = b"s" * 16, b"a" * 16, b"b" * 16
    first = edge_id(src, "HAS", a, b, b"{}", 0)
    assert first == edge_id(src, "HAS", a, b, b"{}", 0)
    others = {
        edge_id(src, "HAS", a, b, b"{}", 1),
        edge_id(src, "HAS", b, a, b"{}", 0),
        edge_id(src, "HAS", a, b, b'{"x":1}', 0),
        edge_id(b"t" * 16, "HAS", a, b, b"{}", 0),
    }
    assert first not in others and len(others) == 4


def test_build_rows_counts_and_reuses_matched_ids() -> None:
    old = _doc("Alpha.", "Beta.")
    first = build_rows(
        1, b"s" * 16, 10, b"b" * 16, old, match=Match(match_keys(old), [None] * 4, {})
    )
    assert (first.changes.added, first.changes.changed, first.changes.unchanged) == (4, 0, 0)
    assert first.root == first.node_ids[0]
    new = _doc("Alpha.", "Gamma.", title="Renamed")
    keys = match_keys(new)
    by_key = {k: deque([n]) for k, n in zip(match_keys(old), first.node_ids, strict=True)}
    taken = assign(keys, by_key)
    before = {row[1]: (row[3], row[4], row[7], row[8]) for row in first.nodes}
    second = build_rows(1, b"s" * 16, 20, b"c" * 16, new, match=Match(keys, taken, before))
    assert second.node_ids[0] == first.node_ids[0]  # the root, properties changed
    assert second.node_ids[2] == first.node_ids[2]  # "Alpha." unchanged
    assert second.node_ids[3] not in first.node_ids  # "Gamma." is new
    assert (second.changes.added, second.changes.changed, second.changes.unchanged) == (2, 1, 1)
    assert len(second.nodes) == 4 and all(row[2] == 20 for row in second.nodes)


def test_worker_ids_follow_the_upsert_ladder_and_a_skipped_node_keeps_its_ambiguity() -> None:
    """Worker-supplied ids against their current versions: another source's identical node
    writes no row (counted unchanged) and no ambiguity row (it would name a node version
    that does not exist); the source's own identical node is written again (unchanged); a
    changed one is written (changed); an unknown id is added."""
    other, mine = b"o" * 16, b"s" * 16
    ids = [b"1" * 16, b"2" * 16, b"3" * 16, b"4" * 16]
    props = [msgspec.json.encode({"n": i}) for i in range(4)]
    proj = Projection(
        b"x",
        [SpanOut(0, 1, "body")],
        [NodeOut(("PERSON",), props[i], (0,), ids[i]) for i in range(4)],
        ambiguities=[AmbiguityOut(i, "date", b"[]", 0.5, 0.5, None) for i in range(4)],
    )
    labels = '["PERSON"]'
    existing = {
        ids[0]: (labels, props[0], None, None, 5, other),  # another source's, identical
        ids[1]: (labels, props[1], None, None, 5, mine),  # this source's, identical
        ids[2]: (labels, b'{"n":-1}', None, None, 5, mine),  # this source's, other content
    }
    rows = build_rows(1, mine, 10, b"b" * 16, proj, existing)
    assert [row[1] for row in rows.nodes] == ids[1:]
    assert [row[1] for row in rows.ambiguities] == ids[1:]
    assert (rows.changes.added, rows.changes.changed, rows.changes.unchanged) == (1, 1, 2)


def _stored(proj: Projection, index: int) -> bytes | None:
    """The key of ``proj``'s node ``index`` computed back from the row build_rows writes."""
    rows = build_rows(1, b"s" * 16, 5, b"b" * 16, proj, {})
    row = rows.nodes[index]
    labels, props, prov = msgspec.json.decode(row[3]), row[4], msgspec.json.decode(row[5])
    return stored_key(labels_part(labels), props, prov, proj.canonical)


def test_a_deferred_key_computed_from_the_stored_row_equals_the_projections() -> None:
    proj = _doc("Alpha.", "Beta, with ünïcode.", "Alpha.")
    proj.nodes.append(NodeOut(("TAG",), b'{"n":1}', ()))  # no spans: its properties
    proj.nodes.append(NodeOut(("QUOTE",), b"{}", (3, 1)))  # two spans, in its span order
    keys = match_keys(proj)
    assert [_stored(proj, i) for i in range(len(proj.nodes))] == keys


def test_a_trimmed_provenance_has_no_stored_key() -> None:
    part = labels_part(["PERSON"])
    assert stored_key(part, b"{}", [[0, 3, 1_700_000_000_000_000]], b"Ana") is None
    assert stored_key(part, b"{}", [[0, 3]], b"Ana") is not None


def test_a_first_version_defers_its_keys_and_worker_ids_keep_none() -> None:
    proj = Projection(
        b"x",
        [SpanOut(0, 1, "body")],
        [NodeOut(("P",), b"{}", (0,)), NodeOut(("PERSON",), b"{}", (0,), node_id=b"\x01" * 16)],
    )
    assert deferred_keys(proj) == [DEFERRED, None]
