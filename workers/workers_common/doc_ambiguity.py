"""Document-level temporal ambiguity detection (docs/formats.md, "Temporal ambiguity"), for
workers whose projection is a document of blocks (docling; the web worker
shares its projection).

Detection runs over the block texts the projection spans and targets the DOCUMENT node
(``nodeRef`` 0). Three rules, at most one ambiguity per submission, priority
``conflicting_dates`` > ``relative_date`` > ``undated`` (the others that fired are counted in
``ambiguities_suppressed``). Dates are the absolute ones of :mod:`workers_common.temporal`.
Deterministic: only document content is used, never the wall clock. Windows are measured in
characters of a block's text; a role keyword or marker must lie wholly inside the window
before the date or phrase (same block), matched case-insensitively on word boundaries. A role
window also stops at the block's previous date: in "Effective 2026-04-01. Signed 2026-03-01"
the second date is signed, not effective.

* **Rule 1, conflicting_dates** — a role-dated mention is a date preceded within 48 characters
  by a role keyword (highest precedence in the window wins; lexicon in :data:`ROLES`). Two or
  more distinct role-dated dates: one candidate per date, ``"YYYY-MM-DD (role)"`` with the
  date's highest-precedence role, ordered by precedence descending then date ascending, at most
  4; ``validFrom`` = the date; ``spanRef`` = the block of its first highest-role mention;
  detectorConfidence 0.7, appliedCandidateConfidence 0.55.
* **Rule 2, relative_date** — an effectiveness marker within 32 characters before
  ``(the )?(next|following) (month|quarter|year)``. Anchor: the highest-precedence role-dated
  mention (ties: first in reading order), else the first date in reading order. Anchored:
  ``["YYYY-MM-DD (start of next <unit> after YYYY-MM-DD)", "YYYY-MM-DD (document date)"]``
  (calendar months, quarters from Jan/Apr/Jul/Oct, years; strictly after the anchor; UTC),
  spanRefs the phrase's and the anchor's blocks, 0.85 / 0.5. Unanchored (no date anywhere):
  one candidate without interval, ``"<marker … phrase> (no anchor date in document)"``,
  0.85 / 0.0.
* **Rule 3, undated** — no date anywhere and canonical text of at least 200 bytes: one
  candidate ``"No date found in document"`` without interval or spanRef, 0.9 / 0.0.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workers_common.temporal import find_dates, to_us

__all__ = ["ROLES", "Block", "Detection", "detect_document_ambiguity"]

#: Role keywords and their precedence (higher wins), for Rule 1.
ROLES: dict[str, int] = {
    "effective": 5,
    "with effect from": 5,
    "takes effect": 5,
    "commencing": 5,
    "valid from": 5,
    "as of": 4,
    "executed": 3,
    "signed": 3,
    "signature date": 3,
    "dated": 2,
    "countersigned": 1,
}
ROLE_WINDOW = 48
MARKER_WINDOW = 32
MAX_CANDIDATES = 4
UNDATED_MIN_BYTES = 200
_PRIORITY = ("conflicting_dates", "relative_date", "undated")

_ROLE = re.compile(
    r"\b(" + "|".join(re.escape(k).replace(r"\ ", r"\s+") for k in ROLES) + r")\b", re.IGNORECASE
)
_MARKER = re.compile(
    r"\b(effective|with\s+effect|takes\s+effect|starting|commencing|begins)\b", re.IGNORECASE
)
_RELATIVE = re.compile(r"\b(?:the\s+)?(?:next|following)\s+(month|quarter|year)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Block:
    """One projected block: its text (as in the canonical text) and its span's index."""

    text: str
    span: int


@dataclass(frozen=True, slots=True)
class Detection:
    """What the rules found: ``ambiguity`` in the submission's wire shape (``None`` when none
    fired or ``clarify`` is off) and the kinds that fired, in priority order."""

    ambiguity: dict[str, Any] | None = None
    fired: tuple[str, ...] = field(default=())

    @property
    def stats(self) -> dict[str, int]:
        """``ambiguities`` (0 or 1) and ``ambiguities_suppressed`` for the submission stats."""
        emitted = int(self.ambiguity is not None)
        return {"ambiguities": emitted, "ambiguities_suppressed": len(self.fired) - emitted}


@dataclass(frozen=True, slots=True)
class _Mention:
    order: tuple[int, int]  # (block index, start): reading order
    date: dt.date
    span: int
    role: str | None = None
    precedence: int = 0


def _role_before(text: str, start: int, floor: int) -> tuple[str, int] | None:
    """The highest-precedence role keyword wholly inside the 48 characters before ``start``
    and after ``floor`` (the end of the block's previous date: a keyword belongs to the date
    it precedes, not to later ones); ties: the nearest."""
    window_start = max(floor, start - ROLE_WINDOW)
    best: tuple[str, int] | None = None
    for m in _ROLE.finditer(text, window_start, start):
        role = " ".join(m.group(1).lower().split())
        precedence = ROLES[role]
        if best is None or precedence >= best[1]:
            best = (role, precedence)
    return best


def _mentions(blocks: Sequence[Block]) -> list[_Mention]:
    found = []
    for i, block in enumerate(blocks):
        floor = 0
        for d in find_dates(block.text):
            role, precedence = _role_before(block.text, d.start, floor) or (None, 0)
            found.append(_Mention((i, d.start), d.date, block.span, role, precedence))
            floor = d.end
    return found


def _iso(day: dt.date) -> str:
    return day.isoformat()


def _conflicting(mentions: list[_Mention]) -> dict[str, Any] | None:
    best: dict[dt.date, _Mention] = {}
    for m in mentions:
        if m.role is None:
            continue
        held = best.get(m.date)
        if held is None or m.precedence > held.precedence:
            best[m.date] = m
    if len(best) < 2:
        return None
    ordered = sorted(best.values(), key=lambda m: (-m.precedence, m.date))[:MAX_CANDIDATES]
    return {
        "nodeRef": 0,
        "kind": "conflicting_dates",
        "candidates": [
            {"label": f"{_iso(m.date)} ({m.role})", "validFrom": to_us(m.date), "spanRef": m.span}
            for m in ordered
        ],
        "detectorConfidence": 0.7,
        "appliedCandidateConfidence": 0.55,
    }


def _next_start(anchor: dt.date, unit: str) -> dt.date:
    """The first day of the calendar ``unit`` strictly after ``anchor``'s."""
    if unit == "year":
        return dt.date(anchor.year + 1, 1, 1)
    months = 1 if unit == "month" else 3
    first = anchor.month if unit == "month" else (anchor.month - 1) // 3 * 3 + 1
    month = first + months
    return dt.date(anchor.year + (month - 1) // 12, (month - 1) % 12 + 1, 1)


def _relative_phrase(blocks: Sequence[Block]) -> tuple[str, str, int] | None:
    """The first ``(phrase text, unit, span)`` whose phrase has a marker in the 32 characters
    before it, in reading order."""
    for block in blocks:
        for rel in _RELATIVE.finditer(block.text):
            window_start = max(0, rel.start() - MARKER_WINDOW)
            markers = list(_MARKER.finditer(block.text, window_start, rel.start()))
            if markers:
                phrase = " ".join(block.text[markers[0].start() : rel.end()].split())
                return phrase, rel.group(1).lower(), block.span
    return None


def _relative(blocks: Sequence[Block], mentions: list[_Mention]) -> dict[str, Any] | None:
    found = _relative_phrase(blocks)
    if found is None:
        return None
    phrase, unit, span = found
    if not mentions:
        return {
            "nodeRef": 0,
            "kind": "relative_date",
            "candidates": [
                {"label": f"{phrase} (no anchor date in document)", "spanRef": span},
            ],
            "detectorConfidence": 0.85,
            "appliedCandidateConfidence": 0.0,
        }
    roled = [m for m in mentions if m.role is not None]
    if roled:
        top = max(m.precedence for m in roled)
        anchor = min((m for m in roled if m.precedence == top), key=lambda m: m.order)
    else:
        anchor = min(mentions, key=lambda m: m.order)
    start = _next_start(anchor.date, unit)
    return {
        "nodeRef": 0,
        "kind": "relative_date",
        "candidates": [
            {
                "label": f"{_iso(start)} (start of next {unit} after {_iso(anchor.date)})",
                "validFrom": to_us(start),
                "spanRef": span,
            },
            {
                "label": f"{_iso(anchor.date)} (document date)",
                "validFrom": to_us(anchor.date),
                "spanRef": anchor.span,
            },
        ],
        "detectorConfidence": 0.85,
        "appliedCandidateConfidence": 0.5,
    }


def _undated(mentions: list[_Mention], text_bytes: int) -> dict[str, Any] | None:
    if mentions or text_bytes < UNDATED_MIN_BYTES:
        return None
    return {
        "nodeRef": 0,
        "kind": "undated",
        "candidates": [{"label": "No date found in document"}],
        "detectorConfidence": 0.9,
        "appliedCandidateConfidence": 0.0,
    }


def detect_document_ambiguity(
    blocks: Sequence[Block], text_bytes: int, *, clarify: bool
) -> Detection:
    """Run the three rules over ``blocks`` (reading order) of a document whose canonical text
    is ``text_bytes`` UTF-8 bytes long; see the module docstring.

    :param clarify: ``options.clarify``; without it nothing is detected or emitted.
    :returns: the ambiguity to add (for the DOCUMENT node, ``nodeRef`` 0) and the rules that
        fired; ``Detection.stats`` gives the two submission stats.
    """
    if not clarify:
        return Detection()
    mentions = _mentions(blocks)
    results = {
        "conflicting_dates": _conflicting(mentions),
        "relative_date": _relative(blocks, mentions),
        "undated": _undated(mentions, text_bytes),
    }
    fired = tuple(kind for kind in _PRIORITY if results[kind] is not None)
    return Detection(results[fired[0]] if fired else None, fired)
