"""Document-level temporal ambiguity rules (docs/formats.md) (workers_common.doc_ambiguity): one
case per rule branch, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from workers_common.doc_ambiguity import Block, detect_document_ambiguity
from workers_common.temporal import find_dates, to_us

PAD = " Lorem ipsum dolor sit amet." * 8  # 224 bytes of dateless text


def _us(iso: str) -> int:
    (mention,) = find_dates(iso)
    return to_us(mention.date)


def _detect(*texts: str, clarify: bool = True) -> tuple[dict[str, Any] | None, dict[str, int]]:
    blocks = [Block(t, i) for i, t in enumerate(texts)]
    size = len("\n\n".join(texts).encode())
    found = detect_document_ambiguity(blocks, size, clarify=clarify)
    return found.ambiguity, found.stats


def _labels(amb: dict[str, Any] | None) -> list[str]:
    assert amb is not None
    return [c["label"] for c in amb["candidates"]]


CASES: list[tuple[str, tuple[str, ...], str | None, list[str], int]] = [
    # (case, blocks, kind emitted, candidate labels, suppressed)
    (
        "rule 1: two role-dated dates, precedence then date order",
        ("Signed on 1 March 2026.", "This agreement is effective 2026-04-01."),
        "conflicting_dates",
        ["2026-04-01 (effective)", "2026-03-01 (signed)"],
        0,
    ),
    (
        "rule 1: one distinct date under two roles does not conflict",
        ("Dated 2026-03-01 and signed 2026-03-01.",),
        None,
        [],
        0,
    ),
    (
        "rule 1: equal precedence orders by date; capped at 4",
        (
            "Signed 2026-05-05. Signed 2026-01-01. Executed 2026-03-03.",
            "Signed 2026-02-02. Executed 2026-04-04.",
        ),
        "conflicting_dates",
        [
            "2026-01-01 (signed)",
            "2026-02-02 (signed)",
            "2026-03-03 (executed)",
            "2026-04-04 (executed)",
        ],
        0,
    ),
    (
        "rule 1: a role beyond 48 characters does not date the mention",
        ("Effective" + " x" * 30 + " 2026-04-01. Signed 2026-03-01.",),
        None,
        [],
        0,
    ),
    (
        "rule 1: countersigned is its own role (precedence 1), not signed",
        ("Countersigned 2026-03-09. Dated 2026-03-01.",),
        "conflicting_dates",
        ["2026-03-01 (dated)", "2026-03-09 (countersigned)"],
        0,
    ),
    (
        "rule 1: a date's highest role labels it",
        ("Dated 2026-03-01. Effective as of 2026-03-01. Signed 2026-02-20.",),
        "conflicting_dates",
        ["2026-03-01 (effective)", "2026-02-20 (signed)"],
        0,
    ),
    (
        "rule 2 anchored: the highest-role date is the anchor; next calendar quarter",
        (
            "Meeting of 2026-01-10. Signed 15 February 2026.",
            "It takes effect the following quarter.",
        ),
        "relative_date",
        [
            "2026-04-01 (start of next quarter after 2026-02-15)",
            "2026-02-15 (document date)",
        ],
        0,
    ),
    (
        "rule 2 anchored: strictly after a quarter's first day",
        ("Signed 2026-04-01; effective the next quarter.",),
        "relative_date",
        ["2026-07-01 (start of next quarter after 2026-04-01)", "2026-04-01 (document date)"],
        0,
    ),
    (
        "rule 2 anchored: no role-dated mention, the first date in reading order",
        ("Minutes of March 3, 2026 and 2026-05-01.", "Starting next month, fees change."),
        "relative_date",
        ["2026-04-01 (start of next month after 2026-03-03)", "2026-03-03 (document date)"],
        0,
    ),
    (
        "rule 2 anchored: year rolls over",
        ("Dated 2026-12-15. Starting the next year, fees rise.",),
        "relative_date",
        ["2027-01-01 (start of next year after 2026-12-15)", "2026-12-15 (document date)"],
        0,
    ),
    (
        "rule 2 unanchored (short text: rule 3 does not fire)",
        ("The policy is effective the next month.",),
        "relative_date",
        ["effective the next month (no anchor date in document)"],
        0,
    ),
    (
        "rule 2 unanchored beats rule 3 (suppressed)",
        ("Pricing changes commencing the following year." + PAD,),
        "relative_date",
        ["commencing the following year (no anchor date in document)"],
        1,
    ),
    (
        "rule 2: a marker beyond 32 characters does not count",
        ("Effective" + " x" * 20 + " the next quarter. Dated 2026-01-01.",),
        None,
        [],
        0,
    ),
    (
        "rule 3: no date in 200 bytes or more",
        ("A memo without any date at all." + PAD,),
        "undated",
        ["No date found in document"],
        0,
    ),
    (
        "rule 3: under 200 bytes is not worth asking",
        ("A short note.",),
        None,
        [],
        0,
    ),
    (
        "priority: conflicting dates beat a relative phrase",
        ("Signed 2026-03-01. Effective 2026-04-01, or else the following month.",),
        "conflicting_dates",
        ["2026-04-01 (effective)", "2026-03-01 (signed)"],
        1,
    ),
]


@pytest.mark.parametrize(
    ("blocks", "kind", "labels", "suppressed"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_rules(
    blocks: tuple[str, ...], kind: str | None, labels: list[str], suppressed: int
) -> None:
    amb, stats = _detect(*blocks)
    if kind is None:
        assert amb is None and stats == {"ambiguities": 0, "ambiguities_suppressed": 0}
        return
    assert amb is not None and amb["kind"] == kind and amb["nodeRef"] == 0
    assert _labels(amb) == labels
    assert stats == {"ambiguities": 1, "ambiguities_suppressed": suppressed}
    assert "severityHint" not in amb


def test_confidences_intervals_and_span_refs() -> None:
    amb, _ = _detect("Signed on 1 March 2026.", "This agreement is effective 2026-04-01.")
    assert amb is not None
    assert (amb["detectorConfidence"], amb["appliedCandidateConfidence"]) == (0.7, 0.55)
    assert [(c["validFrom"], c["spanRef"]) for c in amb["candidates"]] == [
        (_us("2026-04-01"), 1),
        (_us("2026-03-01"), 0),
    ]
    rel, _ = _detect("Signed 2026-02-15.", "It takes effect the following quarter.")
    assert rel is not None
    assert (rel["detectorConfidence"], rel["appliedCandidateConfidence"]) == (0.85, 0.5)
    assert [(c["validFrom"], c["spanRef"]) for c in rel["candidates"]] == [
        (_us("2026-04-01"), 1),  # the phrase's block
        (_us("2026-02-15"), 0),  # the anchor's block
    ]
    loose, _ = _detect("Effective next year.")
    assert loose is not None and loose["appliedCandidateConfidence"] == 0.0
    assert "validFrom" not in loose["candidates"][0]
    undated, _ = _detect("Nothing dated here." + PAD)
    assert undated is not None
    assert (undated["detectorConfidence"], undated["appliedCandidateConfidence"]) == (0.9, 0.0)
    assert undated["candidates"] == [{"label": "No date found in document"}]


def test_without_clarify_nothing_is_detected() -> None:
    amb, stats = _detect("Signed 2026-03-01. Effective 2026-04-01.", clarify=False)
    assert amb is None and stats == {"ambiguities": 0, "ambiguities_suppressed": 0}


def test_core_accepts_the_emitted_ambiguity() -> None:
    from telha.domain.submission import decode_submission, to_projection
    from workers_common import IngestionResultBuilder

    blocks = ["Signed 2026-03-01.", "Effective 2026-04-01."]
    b = IngestionResultBuilder()
    spans = [b.add_span_text(t + "\n\n", kind="paragraph") for t in blocks]
    b.add_node(["DOCUMENT"], {"name": "d"}, spans=spans)
    found = detect_document_ambiguity(
        [Block(t, s) for t, s in zip(blocks, spans, strict=True)], b.byte_length, clarify=True
    )
    assert found.ambiguity is not None
    sub = b.build()
    sub["ambiguities"] = [found.ambiguity]
    import json

    proj = to_projection(decode_submission(json.dumps(sub).encode()))
    assert proj.nodes[0].valid_from == _us("2026-04-01")  # the first candidate applied
