"""The one shape of ``stats.warnings`` (workers_common.warnings; docs/worker-protocol.md, "The
submission") and how ``telha ingest`` counts it."""

from __future__ import annotations

import pytest

from telha.cli.ingest import warning_count
from workers_common.warnings import Warnings


def test_one_item_per_kind_sorted_first_detail_kept() -> None:
    found = Warnings()
    found.add("truncated", 1, "cut")
    found.add("ragged_rows", 3, "first")
    found.add("ragged_rows", 2, "second")
    found.add("pictures_skipped", 0, "nothing")
    assert found.as_list() == [
        {"kind": "ragged_rows", "count": 5, "detail": "first"},
        {"kind": "truncated", "count": 1, "detail": "cut"},
    ]
    stats: dict[str, object] = {}
    assert found.put(stats) is stats and warning_count(stats) == 6
    again = Warnings.of(stats)
    again.add("truncated")
    assert again.as_list()[1] == {"kind": "truncated", "count": 2, "detail": "cut"}


def test_nothing_recorded_leaves_no_key() -> None:
    stats: dict[str, object] = {"rows": 1}
    Warnings().put(stats)
    assert stats == {"rows": 1} and warning_count(stats) == 0 and warning_count(None) == 0


@pytest.mark.parametrize(("kind", "count"), [("no_such_kind", 1), ("truncated", -1)])
def test_unknown_kind_or_negative_count_is_refused(kind: str, count: int) -> None:
    with pytest.raises(ValueError):
        Warnings().add(kind, count)


def test_cli_counts_an_older_shape_as_one_each() -> None:
    assert warning_count({"warnings": ["body charset 'x': decoded as cp1252"]}) == 1
    assert warning_count({"warnings": "not a list"}) == 0
