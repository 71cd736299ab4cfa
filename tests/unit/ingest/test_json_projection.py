"""The pure JSON bypass projection: spans are byte-exact, nodes in creation order."""

from __future__ import annotations

import json
import unicodedata

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from telha.domain.errors import ContentError
from telha.ingest.json_projection import JsonOptions, project_json

FLAT = JsonOptions(label="REC", nested="flatten", max_records=100, max_depth=8)
CHILD = JsonOptions(label="REC", nested="child", max_records=100, max_depth=8)
SRC = bytes(range(16))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
records = st.lists(st.dictionaries(st.text(max_size=8), values, max_size=6), min_size=1, max_size=8)


def _nfc_deep(value: object) -> object:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, dict):
        return {unicodedata.normalize("NFC", k): _nfc_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nfc_deep(v) for v in value]
    return value


def _valid_or_skip(recs: list[dict[str, object]], opts: JsonOptions) -> object:
    try:
        return project_json(json.dumps(recs, ensure_ascii=False).encode(), opts, source_id=SRC)
    except ContentError:
        return None


@given(records)
def test_each_record_line_is_its_span(recs: list[dict[str, object]]) -> None:
    for opts in (FLAT, CHILD):
        proj = _valid_or_skip(recs, opts)
        if proj is None:
            continue
        text = proj.canonical  # type: ignore[attr-defined]
        decoded = text.decode("utf-8")
        assert unicodedata.is_normalized("NFC", decoded)
        assert len(proj.spans) == len(recs)  # type: ignore[attr-defined]
        lines = text.split(b"\n")
        for span, line, rec in zip(proj.spans, lines, recs, strict=True):  # type: ignore[attr-defined]
            assert text[span.start : span.end] == line
            assert span.kind == "body"
            assert line == msgspec.json.encode(_nfc_deep(rec))
        # Every node points at exactly one record span; record nodes come in input order.
        assert all(len(n.span_refs) == 1 for n in proj.nodes)  # type: ignore[attr-defined]
        roots = [n.span_refs[0] for n in proj.nodes if n.labels == ("REC",)]  # type: ignore[attr-defined]
        assert roots == sorted(roots)


def test_deterministic() -> None:
    raw = json.dumps([{"a": {"b": [1, {"c": 2}]}, "d": [{"e": 1}]}]).encode()
    with pytest.raises(ContentError):
        project_json(raw, FLAT, source_id=SRC)  # an array of arrays holding objects
    raw = json.dumps([{"a": {"b": [1, 2]}, "d": [{"e": 1}]}] * 3).encode()
    one, two = project_json(raw, CHILD, source_id=SRC), project_json(raw, CHILD, source_id=SRC)
    assert one == two


def test_flatten_collision_both_orders_and_lone_dotted_key() -> None:
    for doc in ('{"a.b": 1, "a": {"b": 2}}', '{"a": {"b": 2}, "a.b": 1}'):
        with pytest.raises(ContentError, match="collides"):
            project_json(doc.encode(), FLAT, source_id=SRC)
    proj = project_json(b'{"a.b": 1, "a": {"c": 2}}', FLAT, source_id=SRC)
    assert json.loads(proj.nodes[0].properties_json) == {"a.b": 1, "a.c": 2}
    # Under child the nested object is a node, so there is nothing to collide with.
    proj = project_json(b'{"a.b": 1, "a": {"b": 2}}', CHILD, source_id=SRC)
    assert [n.labels for n in proj.nodes] == [("REC",), ("A",)]
    assert [e.type for e in proj.edges] == ["HAS_A"]


def test_bom_and_encoding() -> None:
    assert project_json(b'\xef\xbb\xbf{"a": 1}', FLAT, source_id=SRC).canonical == b'{"a":1}'
    with pytest.raises(ContentError, match="UTF-8"):
        project_json('{"a": "é"}'.encode("utf-16"), FLAT, source_id=SRC)
    with pytest.raises(ContentError, match="UTF-8"):
        project_json(b'{"a": "\xff"}', FLAT, source_id=SRC)


def test_deep_arrays_fail_fast_without_recursion_error() -> None:
    with pytest.raises(ContentError):
        project_json(b"[" * 100_000, FLAT, source_id=SRC)
    with pytest.raises(ContentError):
        project_json(b'{"a": ' + b"[" * 500 + b"1" + b"]" * 500 + b"}", FLAT, source_id=SRC)


def test_unicode_key_child_label_falls_back() -> None:
    proj = project_json('{"日本": {"x": 1}}'.encode(), CHILD, source_id=SRC)
    assert proj.nodes[1].labels == ("CHILD",)
    assert json.loads(proj.edges[0].properties_json) == {"key": "日本"}
    assert proj.edges[0].type == "HAS_CHILD"


def test_depth_counts_objects_inside_flattened_arrays() -> None:
    shallow = JsonOptions(label="REC", nested="flatten", max_records=10, max_depth=3)
    with pytest.raises(ContentError, match="json_max_depth"):
        project_json(b'{"a": {"b": {"items": [{"x": {"y": 1}}]}}}', shallow, source_id=SRC)
    proj = project_json(b'{"a": {"items": [{"x": 1}]}}', shallow, source_id=SRC)
    assert [n.labels for n in proj.nodes] == [("REC",), ("A_ITEMS",)]


def test_edges_listed_in_creation_order() -> None:
    proj = project_json(b'{"kids": [{"sub": {"z": 1}}, {"k": 2}]}', CHILD, source_id=SRC)
    assert [(e.type, e.from_ref, e.to_ref) for e in proj.edges] == [
        ("HAS_KIDS", 0, 1),
        ("HAS_SUB", 1, 2),
        ("HAS_KIDS", 0, 3),
    ]


def test_node_cap_per_request() -> None:
    capped = JsonOptions(label="REC", nested="child", max_records=10, max_depth=8, max_nodes=5)
    project_json(json.dumps({"a": [{}] * 4}).encode(), capped, source_id=SRC)
    with pytest.raises(ContentError, match="more than 5 nodes"):
        project_json(json.dumps({"a": [{}] * 5}).encode(), capped, source_id=SRC)


def test_keys_equal_after_nfc_are_refused() -> None:
    doc = '{"\u00e9": 1, "e\u0301": 2}'.encode()
    with pytest.raises(ContentError, match="NFC"):
        project_json(doc, FLAT, source_id=SRC)
