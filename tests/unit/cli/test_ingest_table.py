"""The closing table's pure layout (telha.cli.ingest_table; docs/cli-and-client.md)."""

from __future__ import annotations

import uuid

import uuid_utils
from rich.console import Console

from telha.cli.ingest_table import TableRow, short_ids, summary_line, terminal_table, tsv_lines


def test_random_ids_keep_their_start_at_least_eight_characters() -> None:
    ids = ["1cc4acd4-a8a3-4b22-b645-6fab4337e000", "1cc4acd5-0000-4000-8000-000000000000"]
    assert short_ids(ids) == {ids[0]: "1cc4acd4", ids[1]: "1cc4acd5"}
    close = ["abcdef12-3456-4000-8000-000000000001", "abcdef12-3457-4000-8000-000000000002"]
    short = short_ids(close)
    assert len(set(short.values())) == 2
    assert all(s.startswith("…") or i.startswith(s) for i, s in short.items())


def test_uuid7_job_ids_made_together_are_told_apart_by_their_end() -> None:
    ids = [str(uuid_utils.uuid7()) for _ in range(50)]
    short = short_ids(ids)
    assert len(set(short.values())) == 50
    for full, s in short.items():
        assert s.startswith("…") and full.endswith(s[1:]) and len(s) <= 13


def test_a_single_id_is_eight_characters_and_empty_ids_are_left_out() -> None:
    one = str(uuid.uuid4())
    assert short_ids([one, "", one]) == {one: one[:8]}
    assert short_ids(["abc"]) == {"abc": "abc"}


def test_the_summary_counts_outcomes_in_a_fixed_order() -> None:
    outcomes = ["deduplicated"] * 12 + ["completed"] * 76 + ["refused"] * 5 + ["dead"] * 4
    assert summary_line(outcomes, 17.21) == (
        "76 completed, 4 dead, 5 refused, 12 deduplicated in 17.2 s"
    )
    assert summary_line(["pending", "completed"], 0.04) == "1 completed, 1 pending in 0.0 s"


def test_a_built_state_text_is_shown_as_given_and_tsv_has_full_ids() -> None:
    src, job = str(uuid.uuid4()), str(uuid_utils.uuid7())
    row = TableRow("a.eml", src, job, "completed, 2 of 3 attachments dead", "completed", "4")
    console = Console(width=80, record=True, color_system=None)
    console.print(terminal_table([row], wide=False, width=80))
    text = console.export_text()
    assert "attachments" in text and src[:8] in text and src not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    assert tsv_lines([row])[1].split("\t") == [
        "a.eml",
        src,
        job,
        "completed, 2 of 3 attachments dead",
        "4",
        "",
    ]


def test_counted_nouns_are_singular_for_one_only() -> None:
    from telha.cli.plural import plural

    assert [plural(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    assert plural(1, "raw upload") == "1 raw upload"
