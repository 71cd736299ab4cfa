"""workers_common.temporal: the absolute date recogniser (docs/formats.md, "Temporal ambiguity")."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers_common.temporal import find_dates, to_us


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("Effective 2026-07-01.", [dt.date(2026, 7, 1)]),
        ("signed on 1st July 2026 and 3 Sept 2026", [dt.date(2026, 7, 1), dt.date(2026, 9, 3)]),
        ("As of JANUARY 22nd, 2025 the", [dt.date(2025, 1, 22)]),
        ("dated Feb. 9 2024", [dt.date(2024, 2, 9)]),
        ("2026-02-30 is not a day, nor 31 April 2026", []),
        ("1/2/2026 and 01-02-2026 are ambiguous", []),
        ("version 12026-07-01x and 2026-07-011", []),
        ("May 5, 2026", [dt.date(2026, 5, 5)]),
    ],
)
def test_find_dates(text: str, dates: list[dt.date]) -> None:
    found = find_dates(text)
    assert [d.date for d in found] == dates
    for d in found:
        assert (
            d.date.isoformat()[:4] in text[d.start : d.end]
            or str(d.date.year) in text[d.start : d.end]
        )


def test_us_is_utc_midnight() -> None:
    assert to_us(dt.date(1970, 1, 2)) == 86_400_000_000
    assert (
        find_dates("2026-07-01")[0].us
        == int(dt.datetime(2026, 7, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000
    )


@given(st.dates(min_value=dt.date(1000, 1, 1)))
def test_every_iso_and_textual_date_round_trips(day: dt.date) -> None:
    assert [d.date for d in find_dates(f"on {day.isoformat()}.")] == [day]
    assert [d.date for d in find_dates(f"{day.day} {day:%B} {day.year}")] == [day]
    assert [d.date for d in find_dates(f"{day:%b} {day.day}, {day.year}")] == [day]
