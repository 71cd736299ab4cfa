"""``childJobs[].rootNodeId``: validated as a UUID; core gives it to a single-shot
child's first node only when the worker set no id there and no other node has it."""

from __future__ import annotations

import json
import uuid

import pytest

from telha.domain.submission import ChildJobIn, InvalidSubmission, decode_submission, to_projection
from telha.ingest.job_payload import child_job as _child_job
from telha.ingest.job_payload import decode_payload as _decode_payload
from telha.ingest.job_payload import with_root_id as _with_root_id

ROOT = str(uuid.uuid4())


def _projection(*ids: str | None) -> object:
    nodes = [{"labels": ["DOCUMENT"], "properties": {"b": 1, "a": 2}, **({"id": i} if i else {})}
             for i in ids]  # fmt: skip
    return to_projection(decode_submission(json.dumps({"v": 1, "nodes": nodes}).encode()))


def test_a_bad_root_node_id_is_an_invalid_submission() -> None:
    child = ChildJobIn(format="text", name="attachment:x", content_b64="eA==", root_node_id="x")
    with pytest.raises(InvalidSubmission, match="rootNodeId is not a UUID"):
        _child_job(child)
    good = _child_job(ChildJobIn(format="text", name="a", content_b64="eA==", root_node_id=ROOT))
    assert _decode_payload(good.payload).root_node_id == ROOT


def test_the_root_id_goes_to_a_first_node_without_one() -> None:
    p = _with_root_id(_projection(None, None), ROOT)  # type: ignore[arg-type]
    assert p.nodes[0].node_id == uuid.UUID(ROOT).bytes and p.nodes[1].node_id is None
    assert p.nodes[0].properties_json == b'{"a":2,"b":1}'  # sorted, as every deterministic id
    own = str(uuid.uuid4())
    kept = _with_root_id(_projection(own), ROOT)  # type: ignore[arg-type]
    assert kept.nodes[0].node_id == uuid.UUID(own).bytes  # the worker's own id stands
    taken = _with_root_id(_projection(None, ROOT), ROOT)  # type: ignore[arg-type]
    assert taken.nodes[0].node_id is None  # another node has it already: no duplicate id
