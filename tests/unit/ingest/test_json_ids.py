"""Record identity of the JSON projection: which records get a node id from their id key, and
that ids are deterministic, per source, and never repeat inside one projection."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telha.domain.errors import ContentError
from telha.ingest.json_ids import AUTO, OFF, IdRule
from telha.ingest.json_projection import JsonOptions, project_json

# ``options.id_key: true``: ``id``, else ``_id``, where usable (without the option: off).
FLAT = JsonOptions(label="REC", nested="flatten", max_records=100, max_depth=8, ids=AUTO)
CHILD = JsonOptions(label="REC", nested="child", max_records=100, max_depth=8, ids=AUTO)
SKU = JsonOptions(
    label="REC", nested="child", max_records=100, max_depth=8, ids=IdRule(("sku",), True)
)
SRC = bytes(range(16))
OTHER = bytes(range(1, 17))


def _ids(recs: object, opts: JsonOptions = FLAT, source: bytes = SRC) -> list[bytes | None]:
    return [
        n.node_id for n in project_json(json.dumps(recs).encode(), opts, source_id=source).nodes
    ]


def test_a_record_keeps_its_node_id_when_edited() -> None:
    v1 = _ids([{"id": 1, "t": "a"}, {"id": "x", "t": "b"}])
    v2 = _ids([{"id": "x", "t": "b!"}, {"id": 1, "t": "a"}, {"id": 2}])
    assert None not in v1 and len(set(v1)) == 2
    assert v2[:2] == [v1[1], v1[0]]  # edited and moved: the same ids
    assert v2[2] not in v1
    assert all(len(i) == 16 and i[6] >> 4 == 8 and i[8] >> 6 == 2 for i in v2 if i)
    # The same values in another source are other nodes; "1" is not 1.
    assert set(_ids([{"id": 1}, {"id": "x"}], source=OTHER)).isdisjoint(v1)
    assert _ids([{"id": "1"}]) != _ids([{"id": 1}])


def test_default_rule_falls_back_to_content_identity() -> None:
    ids = _ids([{"id": 1}, {"id": 1}, {"id": 2}, {"id": {"$oid": "a"}}, {"id": True}, {"n": 1}])
    assert ids[:2] == [None, None]  # a shared id: both matched by content
    assert ids[2] is not None and ids[3:] == [None, None, None]
    underscore = _ids([{"_id": "a"}, {"n": 1}])
    assert underscore[0] is not None and underscore[1] is None
    # ``id`` wins over ``_id`` in the document; ``false`` turns the rule off.
    assert _ids([{"_id": "a"}, {"id": 3}])[0] is None
    off = JsonOptions(label="REC", nested="flatten", max_records=100, max_depth=8, ids=OFF)
    assert _ids([{"id": 1}], off) == [None]


def test_named_id_key_refuses_what_it_cannot_use() -> None:
    ok = _ids([{"sku": "A", "id": 1}, {"sku": 7}], SKU)
    assert None not in ok
    bad = {
        "missing": ([{"sku": "A"}, {"n": 1}], "record 1 has no id key 'sku'"),
        "object": ([{"sku": {"a": 1}}], 'record 0 has {"a":1} as its id key'),
        "float": ([{"sku": 1.5}], "record 0 has 1.5 as its id key"),
        "bool": ([{"sku": False}], "record 0 has false as its id key"),
        "null": ([{"sku": None}], "record 0 has null as its id key"),
        "shared": ([{"sku": "A"}, {"sku": "B"}, {"sku": "A"}], "records 0 and 2 share"),
    }
    for recs, message in bad.values():
        with pytest.raises(ContentError, match=message):
            _ids(recs, SKU)


def test_children_of_an_identified_record_take_ids_from_it() -> None:
    doc = {"id": 9, "parties": [{"n": "a"}, {"n": "b"}], "meta": {"k": 1}}
    v1 = _ids(doc, CHILD)
    edited = {"id": 9, "parties": [{"n": "a"}, {"n": "B"}, {"n": "c"}], "meta": {"k": 2}}
    v2 = _ids(edited, CHILD)
    assert None not in v1 and len(set(v1)) == 4
    # Record, parties 0 and 1, then the new party 2, then meta: by path and position,
    # whatever the content.
    assert v2[:3] == v1[:3] and v2[4] == v1[3] and v2[3] not in v1
    assert all(i[:6] == v1[0][:6] for i in v2 if i)  # a source's ids share a prefix
    assert _ids({"n": 1, "parties": [{"n": "a"}]}, CHILD) == [None, None]


def test_a_literal_dotted_key_beside_a_flattened_one_gets_other_ids() -> None:
    ids = _ids({"id": 1, "a.b": [{"x": 1}], "a": {"b": [{"y": 2}]}}, FLAT)
    assert len(ids) == 3 and len(set(ids)) == 3


def test_same_bytes_same_projection() -> None:
    raw = json.dumps([{"id": i, "kids": [{"k": i}]} for i in range(5)]).encode()
    assert project_json(raw, CHILD, source_id=SRC) == project_json(raw, CHILD, source_id=SRC)


keys = st.sampled_from(["id", "_id", "a", "b", "a.b", "kids"])
leaf = st.one_of(st.integers(0, 3), st.text(max_size=2), st.none(), st.booleans())
value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(keys, value, max_size=4), min_size=1, max_size=6))
def test_supplied_ids_never_repeat_in_a_projection(recs: list[dict[str, object]]) -> None:
    for opts in (FLAT, CHILD):
        try:
            ids = _ids(recs, opts)
        except ContentError:
            continue
        supplied = [i for i in ids if i is not None]
        assert len(supplied) == len(set(supplied))
