"""Cell typing shared by every table a worker projects (docs/formats.md, "Tables"): the
patterns of :mod:`tabular_worker.cells` (which applies them to polars columns) and a pure
Python column typer for small tables (HTML, DOCX, PPTX and PDF tables in
:mod:`docling_worker.projection`), so a cell reads the same whatever file held it.

**Rule.** Each non-empty cell (stripped) is tested against ``bool`` (``true``/``false``, any
case), ``int`` (``[+-]digits``), ``float`` (decimal or scientific), ``date`` (ISO
``YYYY-MM-DD``, numeric ``a/b/yyyy`` or ``a-b-yyyy``, dotted ``d.m.yyyy``) and ``datetime``
(ISO date, ``T`` or space, ``HH:MM[:SS[.f]]``, optional ``Z``/offset). The column takes the
type with the most matching cells (ties to the narrower type) when it matches more than half
of its non-empty cells, else ``string``. Values: int, float, bool, ISO date string, ISO
datetime string with ``T``; a cell that does not fit its column's type keeps its text;
empty → ``None``. Numeric dates are read day-first when the whole column holds more
day-first evidence (``a > 12``) than month-first evidence (``b > 12``), month-first otherwise.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

__all__ = [
    "ANY_DATE",
    "BOOL",
    "DATETIME",
    "FLOAT",
    "INT",
    "ISO_DATE",
    "NUM_DATE",
    "PATTERNS",
    "type_column",
]

BOOL = r"^(?i:true|false)$"
INT = r"^[+-]?\d+$"
FLOAT = r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$"
ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
NUM_DATE = r"^(\d{1,2})([/.-])(\d{1,2})([/.-])(\d{4})$"
ANY_DATE = (
    r"^(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{4}|\d{1,2}-\d{1,2}-\d{4}|\d{1,2}\.\d{1,2}\.\d{4})$"
)
DATETIME = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?$"
#: Type name → pattern, narrowest first (the tie-break order).
PATTERNS = {"bool": BOOL, "int": INT, "float": FLOAT, "date": ANY_DATE, "datetime": DATETIME}

_COMPILED = {t: re.compile(p) for t, p in PATTERNS.items()}
_NUM = re.compile(NUM_DATE)
_ISO = re.compile(ISO_DATE)


def _iso(y: int, m: int, d: int) -> str | None:
    try:
        return dt.date(y, m, d).isoformat()
    except ValueError:
        return None


def _date(text: str, day_first: bool) -> str | None:
    if _ISO.match(text):
        return _iso(int(text[:4]), int(text[5:7]), int(text[8:10]))
    m = _NUM.match(text)
    if m is None or m.group(2) != m.group(4):
        return None
    a, b, y = int(m.group(1)), int(m.group(3)), int(m.group(5))
    if m.group(2) == "." or a > 12 or (day_first and b <= 12):
        return _iso(y, b, a)
    return _iso(y, a, b)


def _value(text: str, kind: str, day_first: bool) -> Any:
    if not _COMPILED[kind].match(text):
        return None
    if kind == "bool":
        return text.lower() == "true"
    if kind == "int":
        return int(text)
    if kind == "float":
        value = float(text)
        return value if math.isfinite(value) else None
    if kind == "date":
        return _date(text, day_first)
    if _iso(int(text[:4]), int(text[5:7]), int(text[8:10])) is None:
        return None
    return text.replace(" ", "T", 1)


def _day_first(cells: list[str]) -> bool:
    votes = [0, 0]  # day-first, month-first
    for text in cells:
        m = _NUM.match(text)
        if m is not None and m.group(2) == m.group(4) and m.group(2) != ".":
            a, b = int(m.group(1)), int(m.group(3))
            votes[0] += a > 12 and b <= 12
            votes[1] += b > 12 and a <= 12
    return votes[0] > votes[1]


def type_column(values: list[str | None]) -> tuple[str, list[Any]]:
    """``(type, typed values)`` of one column's cell texts by the module's rule."""
    cells = [v.strip() for v in values if v is not None and v.strip()]
    best, best_count = "string", 0
    for kind, pattern in _COMPILED.items():
        count = sum(1 for c in cells if pattern.match(c))
        if count > best_count:
            best, best_count = kind, count
    if best_count * 2 <= len(cells):
        best = "string"
    if best == "string":
        return best, [v if v else None for v in values]
    day_first = best == "date" and _day_first(cells)
    out: list[Any] = []
    for v in values:
        if v is None or not v.strip():
            out.append(None)
            continue
        typed = _value(v.strip(), best, day_first)
        out.append(v if typed is None else typed)
    return best, out
