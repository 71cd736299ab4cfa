"""Submission validation (telha/domain/submission.py), property-tested: generated valid
submissions become the projection they describe; offsets outside the text or inside a UTF-8
character, bad labels and bad references are refused with :class:`InvalidSubmission`."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telha.domain.submission import InvalidSubmission, decode_submission, to_projection

#: Characters of one to four UTF-8 bytes, all NFC-stable, no CR.
ALPHABET = ["a", "z", " ", "\n", "é", "ß", "€", "中", "😀", "ñ", "0"]
#: UPPER_SNAKE names: runs of [A-Z0-9] joined by single underscores.
labels = st.lists(st.text("ABCXYZ0129", min_size=1, max_size=4), min_size=1, max_size=3).map(
    "_".join
)
bad_labels = st.sampled_from(["", "lower", "Mixed", "A-B", "A__B", "_A", "A_", "A B", "É"])


#: Refusal properties need fewer examples than the round trip; no deadline on shared CPUs.
few = settings(max_examples=40, deadline=None)


def canonical_texts() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join)


def boundaries(text: str) -> list[int]:
    """Every byte offset of ``text`` that is on a character boundary (0 and the end too)."""
    out, at = [0], 0
    for ch in text:
        at += len(ch.encode())
        out.append(at)
    return out


def inside_offsets(text: str) -> list[int]:
    """Byte offsets that fall inside a multi-byte character."""
    on = set(boundaries(text))
    return [i for i in range(len(text.encode())) if i not in on]


@st.composite
def submissions(draw: st.DrawFn) -> dict[str, Any]:
    text = draw(canonical_texts())
    cuts = boundaries(text)
    spans = []
    for _ in range(draw(st.integers(0, 6))):
        a, b = sorted(draw(st.lists(st.sampled_from(cuts), min_size=2, max_size=2)))
        spans.append({"start": a, "end": b, "kind": draw(st.sampled_from(["body", "cell_2"]))})
    count = draw(st.integers(0, 5))
    ids = draw(st.lists(st.uuids(), min_size=count, max_size=count, unique=True))
    nodes = []
    for node_id in ids:
        node: dict[str, Any] = {
            "labels": draw(st.lists(labels, min_size=1, max_size=3, unique=True)),
            "properties": draw(st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=2)),
            "spanRefs": draw(st.lists(st.integers(0, len(spans) - 1), max_size=3)) if spans else [],
        }
        if draw(st.booleans()):
            node["id"] = str(node_id)
        nodes.append(node)
    edges = []
    for _ in range(draw(st.integers(0, 4)) if nodes else 0):
        edge: dict[str, Any] = {"type": draw(labels)}
        for side in ("from", "to"):
            if draw(st.booleans()):
                edge[f"{side}Ref"] = draw(st.integers(0, len(nodes) - 1))
            else:
                edge[f"{side}Id"] = str(draw(st.uuids()))
        edges.append(edge)
    return {"v": 1, "canonicalText": text, "spans": spans, "nodes": nodes, "relationships": edges}


def project(sub: dict[str, Any], base: int = 0) -> Any:
    return to_projection(decode_submission(msgspec.json.encode(sub)), base)


@settings(max_examples=150, deadline=None)
@given(submissions())
def test_valid_submissions_become_their_projection(sub: dict[str, Any]) -> None:
    proj = project(sub)
    assert proj.canonical == sub["canonicalText"].encode()
    assert [(s.start, s.end, s.kind) for s in proj.spans] == [
        (s["start"], s["end"], s["kind"]) for s in sub["spans"]
    ]
    assert [list(n.labels) for n in proj.nodes] == [n["labels"] for n in sub["nodes"]]
    assert [list(n.span_refs) for n in proj.nodes] == [n["spanRefs"] for n in sub["nodes"]]
    assert [n.node_id for n in proj.nodes] == [
        uuid.UUID(n["id"]).bytes if "id" in n else None for n in sub["nodes"]
    ]
    assert [msgspec.json.decode(n.properties_json) for n in proj.nodes] == [
        n["properties"] for n in sub["nodes"]
    ]
    for edge, out in zip(sub["relationships"], proj.edges, strict=True):
        assert out.type == edge["type"]
        assert out.from_ref == edge.get("fromRef") and out.to_ref == edge.get("toRef")
        assert out.from_id == (uuid.UUID(edge["fromId"]).bytes if "fromId" in edge else None)
    assert proj.earlier_offsets == []


@few
@given(submissions(), st.integers(1, 50), st.booleans())
def test_offsets_outside_the_text_are_refused(sub: dict[str, Any], past: int, at_end: bool) -> None:
    n = len(sub["canonicalText"].encode())
    span = {"start": 0, "end": n + past, "kind": "body"} if at_end else {
        "start": n + past, "end": n + past, "kind": "body",
    }  # fmt: skip
    sub["spans"].append(span)
    with pytest.raises(InvalidSubmission, match="outside the text"):
        project(sub)


@few
@given(submissions())
def test_start_after_end_is_refused(sub: dict[str, Any]) -> None:
    n = len(sub["canonicalText"].encode())
    if n == 0:
        sub["canonicalText"] = "x"
        n = 1
    sub["spans"].append({"start": n, "end": 0, "kind": "body"})
    with pytest.raises(InvalidSubmission, match="outside the text"):
        project(sub)


@few
@given(submissions(), st.data())
def test_offsets_inside_a_character_are_refused(sub: dict[str, Any], data: st.DataObject) -> None:
    text = sub["canonicalText"] + "€"  # at least one multi-byte character
    sub["canonicalText"] = text
    pos = data.draw(st.sampled_from(inside_offsets(text)))
    end = len(text.encode())
    span = data.draw(st.sampled_from([(pos, end), (0, pos)]))
    sub["spans"].append({"start": span[0], "end": span[1], "kind": "body"})
    with pytest.raises(InvalidSubmission, match="UTF-8 character boundaries"):
        project(sub)


@few
@given(submissions(), st.data())
def test_offsets_into_earlier_text_are_left_to_storage(
    sub: dict[str, Any], data: st.DataObject
) -> None:
    """A streamed part's offsets below its base point into text storage holds: validation
    cannot see those bytes, so it hands them on (storage checks them)."""
    base = data.draw(st.integers(1, 100))
    shift = [dict(s, start=s["start"] + base, end=s["end"] + base) for s in sub["spans"]]
    early = data.draw(st.integers(0, base - 1))
    sub["spans"] = [*shift, {"start": early, "end": base, "kind": "body"}]
    proj = project(sub, base)
    assert proj.base == base and early in proj.earlier_offsets


@few
@given(submissions(), bad_labels)
def test_bad_labels_are_refused(sub: dict[str, Any], bad: str) -> None:
    sub["nodes"].append({"labels": ["GOOD", bad], "properties": {}, "spanRefs": []})
    with pytest.raises(InvalidSubmission, match="UPPER_SNAKE"):
        project(sub)


@few
@given(submissions())
def test_no_labels_and_repeated_labels_are_refused(sub: dict[str, Any]) -> None:
    for node_labels in ([], ["A", "A"]):
        bad = dict(sub, nodes=[*sub["nodes"], {"labels": node_labels}])
        with pytest.raises(InvalidSubmission, match=r"nodes\[\d+\]: labels"):
            project(bad)


@few
@given(submissions(), bad_labels)
def test_bad_edge_types_are_refused(sub: dict[str, Any], bad: str) -> None:
    sub["nodes"].append({"labels": ["N"]})
    sub["relationships"].append({"type": bad, "fromRef": 0, "toRef": 0})
    with pytest.raises(InvalidSubmission, match="is not UPPER_SNAKE"):
        project(sub)


@few
@given(submissions(), st.integers(0, 20))
def test_span_refs_out_of_range_are_refused(sub: dict[str, Any], past: int) -> None:
    bad = len(sub["spans"]) + past
    sub["nodes"].append({"labels": ["N"], "spanRefs": [bad]})
    with pytest.raises(InvalidSubmission, match=f"spanRef {bad} is out of range"):
        project(sub)
    sub["nodes"][-1]["spanRefs"] = [-1 - past]
    with pytest.raises(InvalidSubmission, match="is out of range"):
        project(sub)


@few
@given(submissions(), st.integers(0, 20), st.sampled_from(["from", "to"]))
def test_edge_refs_out_of_range_are_refused(sub: dict[str, Any], past: int, side: str) -> None:
    sub["nodes"].append({"labels": ["N"]})
    edge = {"type": "E", "fromRef": 0, "toRef": 0, f"{side}Ref": len(sub["nodes"]) + past}
    sub["relationships"].append(edge)
    with pytest.raises(InvalidSubmission, match=f"{side}Ref .* is out of range"):
        project(sub)


@few
@given(submissions(), st.sampled_from(["from", "to"]), st.booleans())
def test_edge_ends_need_exactly_one_of_ref_and_id(
    sub: dict[str, Any], side: str, both: bool
) -> None:
    sub["nodes"].append({"labels": ["N"]})
    edge: dict[str, Any] = {"type": "E", "fromRef": 0, "toRef": 0}
    if both:
        edge[f"{side}Id"] = str(uuid.uuid4())
    else:
        del edge[f"{side}Ref"]
    sub["relationships"].append(edge)
    with pytest.raises(InvalidSubmission, match=f"exactly one of {side}Ref and {side}Id"):
        project(sub)


@few
@given(submissions(), st.sampled_from(["not-a-uuid", "", "1234", "g" * 32]))
def test_ids_that_are_not_uuids_are_refused(sub: dict[str, Any], bad: str) -> None:
    with_node = dict(sub, nodes=[*sub["nodes"], {"labels": ["N"], "id": bad}])
    with pytest.raises(InvalidSubmission, match="is not a UUID"):
        project(with_node)
    sub["nodes"].append({"labels": ["N"]})
    sub["relationships"].append({"type": "E", "fromRef": 0, "toId": bad})
    with pytest.raises(InvalidSubmission, match="is not a UUID"):
        project(sub)


@few
@given(submissions())
def test_a_node_id_twice_is_refused(sub: dict[str, Any]) -> None:
    same = str(uuid.uuid4())
    sub["nodes"] += [{"labels": ["N"], "id": same}, {"labels": ["M"], "id": same}]
    with pytest.raises(InvalidSubmission, match="appears twice"):
        project(sub)


@few
@given(submissions(), st.sampled_from(["e\u0301", "a\r\nb", "x\ry"]))
def test_text_not_canonical_is_refused(sub: dict[str, Any], tail: str) -> None:
    sub["canonicalText"] += tail
    with pytest.raises(InvalidSubmission, match="not normalized"):
        project(sub)


def test_undecodable_or_unknown_fields_are_refused() -> None:
    for raw in (b"not json", b'{"v": 1, "surprise": 1}', b'{"v": "1"}', b"[]"):
        with pytest.raises(InvalidSubmission, match="not a submission"):
            decode_submission(raw)
    with pytest.raises(InvalidSubmission, match="unsupported submission version"):
        project({"v": 2})
