"""workers_common: the result builder, the failure classifier, the text worker's projection."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import text_worker
from telha.domain.submission import InvalidSubmission, decode_submission, to_projection
from workers_common import (
    CorruptInput,
    IngestionResultBuilder,
    Job,
    ResourceLimit,
    UnsupportedFeature,
    classify,
)
from workers_common.prefetch import ahead
from workers_common.splitter import stream_submission


def _job(content: bytes, fmt: str = "markdown", name: str = "doc.md") -> Job:
    return Job("id", f"ingest:{fmt}", fmt, name, content, None, {}, 0, "t", "o")


def test_builder_offsets_and_base_offset() -> None:
    b = IngestionResultBuilder()
    s0 = b.add_span_text("é\r\n", kind="paragraph")
    b.add_text("-")
    s1 = b.add_span_text("x")
    n = b.add_node(["A"], {"k": 1}, spans=[s0], id="2b0e4f9e-9f0e-4a7b-8f52-1c0c0c0c0c0c")
    b.attach_span(n, s1)
    b.add_relationship("R", from_ref=n, to_id="2b0e4f9e-9f0e-4a7b-8f52-1c0c0c0c0c0d")
    out = b.build()
    assert out["canonicalText"] == "é\n-x"
    assert out["spans"] == [
        {"start": 0, "end": 3, "kind": "paragraph"},
        {"start": 4, "end": 5, "kind": "body"},
    ]
    assert out["nodes"][0]["spanRefs"] == [0, 1]
    to_projection(decode_submission(b.to_json()))  # core accepts it

    later = IngestionResultBuilder(base_offset=b.byte_length)
    span = later.add_span_text("tail")
    assert later.build()["spans"][span] == {"start": 5, "end": 9, "kind": "body"}
    with pytest.raises(ValueError):
        later.add_span_range(0, 2)
    with pytest.raises(ValueError):
        later.add_relationship("R", from_ref=0, from_id="x", to_ref=0)


def test_classify() -> None:
    assert classify(CorruptInput("bad"))[:2] == ("corrupt_input: bad", True)
    assert classify(UnsupportedFeature("macros"))[:2] == ("unsupported_feature: macros", True)
    assert classify(ResourceLimit("too big"))[:2] == ("resource_limit: too big", False)
    reason, permanent, kind = classify(RuntimeError("x" * 1000))
    assert kind == "transient" and not permanent and len(reason.encode()) <= 512
    assert reason.startswith("transient: RuntimeError")
    reason, permanent, kind = classify(KeyError("x" * 1000))  # a lookup: input-caused
    assert kind == "corrupt_input" and permanent and len(reason.encode()) <= 512


def test_text_worker_projection() -> None:
    raw = "\ufeff# Títle\r\n\r\nFirst para\nline two\n\n\n## Sub ##\nunder sub\n".encode()
    out = text_worker.handle(_job(raw))
    text = out["canonicalText"].encode()
    assert b"\r" not in text and not out["canonicalText"].startswith("\ufeff")
    spans = out["spans"]
    labels = [(n["labels"][0], n["properties"]) for n in out["nodes"]]
    assert labels == [
        ("DOCUMENT", {"name": "doc.md", "format": "markdown"}),
        ("SECTION", {"level": 1, "title": "Títle"}),
        ("PARAGRAPH", {"text": "First para\nline two"}),
        ("SECTION", {"level": 2, "title": "Sub"}),
        ("PARAGRAPH", {"text": "under sub"}),
    ]
    pieces = [
        text[spans[n["spanRefs"][0]]["start"] : spans[n["spanRefs"][0]]["end"]].decode()
        for n in out["nodes"][1:]
    ]
    assert pieces == ["# Títle", "First para\nline two", "## Sub ##", "under sub"]
    # Sections nest by level: the level-2 heading and its paragraph hang off the level-1 one.
    edges = [(r["fromRef"], r["toRef"], r["properties"]["ord"]) for r in out["relationships"]]
    assert edges == [(0, 1, 0), (1, 2, 0), (1, 3, 1), (3, 4, 0)]
    # Deterministic: the same bytes give the same submission.
    assert json.dumps(text_worker.handle(_job(raw))) == json.dumps(out)
    to_projection(decode_submission(json.dumps(out).encode()))


def test_text_worker_plain_text_keeps_hashes_as_paragraphs() -> None:
    out = text_worker.handle(_job(b"# not a heading in text\n\nsecond", fmt="text", name="a.txt"))
    assert [n["labels"][0] for n in out["nodes"]] == ["DOCUMENT", "PARAGRAPH", "PARAGRAPH"]


def test_text_worker_rejects_non_utf8() -> None:
    with pytest.raises(CorruptInput, match="offset 2"):
        text_worker.handle(_job(b"ok\xff\xfe"))


def test_text_worker_empty_document() -> None:
    out = text_worker.handle(_job(b"", fmt="text"))
    assert out["canonicalText"] == "" and [n["labels"] for n in out["nodes"]] == [["DOCUMENT"]]


def test_builder_extras_reach_the_wire_and_core_accepts_them() -> None:
    b = IngestionResultBuilder()
    span = b.add_span_text("Effective 2026-07-01.")
    doc = b.add_node(["DOCUMENT"], {"name": "d"}, spans=[span], valid_time=(1_000, None))
    b.set_content_hash("ab" * 32)
    b.add_child_job("text", "attachment:1", options={"k": 1}, content=b"\x00\xff")
    b.add_ambiguity(doc, "relative_date", [{"label": "2026-07-01 (document date)"}], 0.85, 0.5)
    b.set_stats({"rows": 1})
    out = b.build()
    assert out["contentHash"] == "ab" * 32 and out["stats"] == {"rows": 1}
    assert out["childJobs"] == [
        {"format": "text", "name": "attachment:1", "options": {"k": 1}, "contentB64": "AP8="}
    ]
    assert out["ambiguities"][0] == {
        "nodeRef": 0,
        "kind": "relative_date",
        "candidates": [{"label": "2026-07-01 (document date)"}],
        "detectorConfidence": 0.85,
        "appliedCandidateConfidence": 0.5,
    }
    assert out["nodes"][0]["validTime"] == {"from": 1_000, "to": None}
    proj = to_projection(decode_submission(b.to_json()))
    assert proj.nodes[0].valid_from == 1_000  # a candidate without an interval changes nothing
    assert proj.ambiguities[0].kind == "relative_date"


def test_first_candidate_interval_becomes_the_node_valid_time() -> None:
    b = IngestionResultBuilder()
    span = b.add_span_text("3/2/2026")
    row = b.add_node(["ROW"], {"d": "2026-03-02"}, spans=[span], valid_time=(1, 2))
    first = {"label": "2026-03-02 (month-first)", "validFrom": 1_772_409_600_000_000, "spanRef": 0}
    second = {"label": "2026-02-03 (day-first)", "validFrom": 1_770_076_800_000_000}
    b.add_ambiguity(row, "day_first_month_first", [first, second], 0.9, 0.5)
    proj = to_projection(decode_submission(b.to_json()))
    assert (proj.nodes[0].valid_from, proj.nodes[0].valid_to) == (1_772_409_600_000_000, None)
    assert json.loads(proj.ambiguities[0].candidates_json)[0]["span"] == [0, 8]


@pytest.mark.parametrize(
    ("ambiguity", "message"),
    [
        ({"nodeRef": 5, "kind": "k", "candidates": [{"label": "x"}]}, "out of range"),
        ({"nodeRef": 0, "kind": "Bad Kind", "candidates": [{"label": "x"}]}, "lower_snake"),
        ({"nodeRef": 0, "kind": "k", "candidates": []}, "at least one candidate"),
        ({"nodeRef": 0, "kind": "k", "candidates": [{"label": "x", "spanRef": 3}]}, "spanRef"),
        (
            {"nodeRef": 0, "kind": "k", "candidates": [{"label": "x"}], "detectorConfidence": 2},
            r"within \[0, 1\]",
        ),
        (
            {
                "nodeRef": 0,
                "kind": "k",
                "candidates": [{"label": "x", "validFrom": 5, "validTo": 1}],
            },
            "before validFrom",
        ),
    ],
)
def test_invalid_ambiguities_are_refused(ambiguity: dict[str, object], message: str) -> None:
    b = IngestionResultBuilder()
    span = b.add_span_text("x")
    b.add_node(["ROW"], {}, spans=[span])
    sub = b.build()
    sub["ambiguities"] = [ambiguity]
    with pytest.raises(InvalidSubmission, match=message):
        to_projection(decode_submission(json.dumps(sub).encode()))


def test_two_ambiguities_on_one_node_are_refused() -> None:
    b = IngestionResultBuilder()
    span = b.add_span_text("x")
    node = b.add_node(["ROW"], {}, spans=[span])
    b.add_ambiguity(node, "a", [{"label": "x"}])
    b.add_ambiguity(node, "b", [{"label": "y"}])
    with pytest.raises(InvalidSubmission, match="already has an ambiguity"):
        to_projection(decode_submission(b.to_json()))


def test_ahead_hands_on_items_in_order_and_runs_ahead() -> None:
    produced: list[int] = []

    def source() -> Iterator[int]:
        for i in range(5):
            produced.append(i)
            yield i

    gen = ahead(source(), depth=1)
    assert next(gen) == 0
    deadline = time.monotonic() + 5
    while len(produced) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    # One taken (being handed on), one built ahead: no more until the next is taken.
    time.sleep(0.1)
    assert produced == [0, 1]
    assert gen.send(["ignored-id"]) == 1
    assert list(gen) == [2, 3, 4]


def test_ahead_reraises_the_source_failure_in_place() -> None:
    def source() -> Iterator[int]:
        yield 1
        raise CorruptInput("row 2 is garbage")

    gen = ahead(source())
    assert next(gen) == 1
    with pytest.raises(CorruptInput, match="row 2"):
        next(gen)


def test_ahead_closed_early_stops_and_closes_the_source() -> None:
    closed = threading.Event()

    def source() -> Iterator[int]:
        try:
            yield from range(1_000_000)
        finally:
            closed.set()

    gen = ahead(source(), depth=2)
    assert next(gen) == 0
    gen.close()
    assert closed.wait(5)


def _document_submission(paragraphs: int) -> dict[str, Any]:
    """DOCUMENT (whole-text span) → SECTION → PARAGRAPHs, an ambiguity, stats."""
    b = IngestionResultBuilder()
    head = b.add_span_text("Heading", kind="heading")
    doc = b.add_node(["DOCUMENT"], {"name": "d"})
    section = b.add_node(["SECTION"], {"title": "Heading", "level": 1}, spans=[head])
    b.add_relationship("CONTAINS", from_ref=doc, to_ref=section, properties={"ord": 0})
    for i in range(paragraphs):
        b.add_text("\n\n")
        span = b.add_span_text(f"Paragraph {i} é " + "w" * 40, kind="paragraph")
        node = b.add_node(["PARAGRAPH"], {"i": i}, spans=[span])
        b.add_relationship("CONTAINS", from_ref=section, to_ref=node, properties={"ord": i})
    b.attach_span(doc, b.add_span_range(0, b.byte_length, "body"))
    b.add_ambiguity(doc, "undated", [{"label": "No date", "spanRef": 3}], 0.9, 0.0)
    b.set_stats({"paragraphs": paragraphs})
    return b.build()


def test_stream_submission_splits_and_core_accepts_every_part() -> None:
    original = _document_submission(60)
    text = original["canonicalText"].encode()
    gen = stream_submission(original, part_bytes=1000)
    parts, base, ids = [], 0, None
    while True:
        try:
            part = gen.send(ids) if parts else next(gen)
        except StopIteration:
            break
        proj = to_projection(decode_submission(json.dumps(part).encode()), base)
        base += len(proj.canonical)
        parts.append(part)
        ids = [str(uuid.uuid4()) for _ in part["nodes"]]
    assert len(parts) > 3 and [p["partial"] for p in parts] == [True] * (len(parts) - 1) + [False]
    assert "".join(p["canonicalText"] for p in parts).encode() == text
    assert sum(len(p["nodes"]) for p in parts) == len(original["nodes"])
    assert sum(len(p["relationships"]) for p in parts) == len(original["relationships"])
    assert all("stats" not in p for p in parts[:-1]) and parts[-1]["stats"] == {"paragraphs": 60}
    last = parts[-1]
    (doc,) = [n for n in last["nodes"] if n["labels"] == ["DOCUMENT"]]  # spans the whole text
    assert last["spans"][doc["spanRefs"][0]] == {"start": 0, "end": len(text), "kind": "body"}
    (amb,) = last["ambiguities"]
    assert last["spans"][amb["candidates"][0]["spanRef"]] == original["spans"][3]
    # Every node's span is the original one: the same text.
    spans_of = sorted(
        (tuple(sorted(n["properties"].items())), p["spans"][n["spanRefs"][0]]["start"])
        for p in parts for n in p["nodes"]
    )  # fmt: skip
    assert spans_of == sorted(
        (tuple(sorted(n["properties"].items())), original["spans"][n["spanRefs"][0]]["start"])
        for n in original["nodes"]
    )
    # The section went early; its edges to later paragraphs address it by the id core gave.
    later_edges = [r for p in parts[1:] for r in p["relationships"] if "fromId" in r]
    assert later_edges


def test_stream_submission_small_text_is_one_final_submission() -> None:
    original = _document_submission(2)
    (only,) = list(stream_submission(original, part_bytes=1_000_000))
    assert only == {**original, "partial": False}


def test_stream_submission_never_cuts_inside_a_block() -> None:
    b = IngestionResultBuilder()
    span = b.add_span_text("x" * 5000, kind="paragraph")  # one block, no blank line to cut at
    b.add_node(["PARAGRAPH"], {}, spans=[span])
    (only,) = list(stream_submission(b.build(), part_bytes=1000))
    assert only["partial"] is False and len(only["canonicalText"]) == 5000
