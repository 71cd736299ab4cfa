"""Absolute date recognition (docs/formats.md, "Temporal ambiguity"), shared by docling,
tabular and email workers. Deterministic and stdlib-only.

Recognised: ISO ``YYYY-MM-DD``; ``D Month YYYY`` and ``Month D, YYYY`` with full or 3-letter
English month names (``Sept`` too), an optional ordinal suffix (``1st``, ``22nd``), any case.
Every match is validated as a real calendar date and converted to µs since the Unix epoch at
UTC midnight. Numeric slash/dash forms such as ``1/2/2026`` are deliberately not recognised:
their reading (day-first or month-first) is ambiguous.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

__all__ = ["DateMention", "find_dates", "to_us"]

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = "(?P<{g}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{g}>\d{{1,2}})(?:st|nd|rd|th)?"
_PATTERN = re.compile(
    r"(?<![\w-])(?:"
    r"(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})"
    r"|" + _DAY.format(g="dd") + r"\s+" + _MONTH.format(g="dm") + r",?\s+(?P<dy>\d{4})"
    r"|" + _MONTH.format(g="mm") + r"\s+" + _DAY.format(g="md") + r",?\s+(?P<my>\d{4})"
    r")(?![\w-])",
    re.IGNORECASE,
)
_EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class DateMention:
    """A recognised date: ``[start, end)`` character offsets in the searched text."""

    start: int
    end: int
    date: dt.date

    @property
    def us(self) -> int:
        """UTC midnight of :attr:`date`, µs since the Unix epoch."""
        return to_us(self.date)


def to_us(day: dt.date) -> int:
    """``day`` at 00:00 UTC in µs since the Unix epoch."""
    return (day - _EPOCH).days * 86_400_000_000


def find_dates(text: str) -> list[DateMention]:
    """Every valid absolute date in ``text``, in reading order (invalid ones like
    ``2026-02-30`` are skipped)."""
    found = []
    for m in _PATTERN.finditer(text):
        g = m.groupdict()
        try:
            if g["iy"]:
                day = dt.date(int(g["iy"]), int(g["im"]), int(g["id"]))
            elif g["dy"]:
                day = dt.date(int(g["dy"]), _MONTHS[g["dm"].lower()], int(g["dd"]))
            else:
                day = dt.date(int(g["my"]), _MONTHS[g["mm"].lower()], int(g["md"]))
        except ValueError:
            continue
        found.append(DateMention(m.start(), m.end(), day))
    return found
