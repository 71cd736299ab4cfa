"""One table (a CSV/TSV file or a worksheet) profiled and ready to stream: header decision,
column names, column types and the data row count, from a lazy frame of string columns.

**Rows**: a row whose cells are all empty or whitespace-only is dropped (blank lines, empty
spreadsheet rows); ``row`` numbers count the remaining data rows from 1.

**Header** (``options.header``): ``true``/``false`` force it; ``auto`` takes the first row as
the header when it has at least one non-empty cell and none of its non-empty cells looks typed
(bool, int, float, date or datetime, as in :mod:`tabular_worker.cells`). Duplicates do not
disqualify a header (they are renamed).

**Column names**: a header cell's text (normalized, tabs/newlines → one space, stripped);
headerless tables and blank header cells get ``col_<i>`` with ``i`` the 1-based column
position; a repeated name gets ``_2``, ``_3``, … (the first unused). ``row`` is reserved for the
row number property, so a column named ``row`` becomes ``row_2``.

**Width**: the widest row decides the column count (ragged rows: missing cells are null, extra
cells get ``col_<i>`` columns); trailing columns that are empty in every row, header included,
are dropped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import polars as pl

from tabular_worker.cells import choose_types, profile_exprs

__all__ = ["Table", "build_table", "column_names", "looks_typed"]

_TYPED = re.compile(
    r"^(?:(?i:true|false)|[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
    r"|\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}[/.-]\d{1,2}[/.-]\d{4})$"
)


@dataclass(frozen=True, slots=True)
class Table:
    """A profiled table.

    :ivar name: file or sheet name.
    :ivar columns: final column names (:func:`column_names`).
    :ivar types: inferred type per column (:data:`tabular_worker.cells.TYPES`).
    :ivar rows: data rows (header excluded, blank rows dropped).
    :ivar header: the first row was taken as the header.
    :ivar batches: ``batches(chunk_rows)`` iterates the data rows as string frames of
        ``len(columns)`` columns (raw text, not yet normalized), in file order.
    """

    name: str
    columns: list[str]
    types: list[str]
    rows: int
    header: bool
    batches: Callable[[int], Iterator[pl.DataFrame]]


def looks_typed(value: str) -> bool:
    """Whether a (stripped) cell text reads as bool, number, date or datetime."""
    return bool(_TYPED.match(value))


def _clean_name(value: str | None) -> str:
    if value is None:
        return ""
    text = unicodedata.normalize("NFC", value)
    return re.sub(r"[\t\r\n]+", " ", text).strip()


def column_names(header: list[str | None] | None, width: int) -> list[str]:
    """Final names of ``width`` columns from the header cells (``None`` when headerless), by the
    rules of the module docstring."""
    raw = [_clean_name(header[i] if header and i < len(header) else None) for i in range(width)]
    taken = {"row"}
    names = []
    for i, name in enumerate(raw, start=1):
        base = name or f"col_{i}"
        candidate, k = base, 2
        while candidate in taken:
            candidate, k = f"{base}_{k}", k + 1
        taken.add(candidate)
        names.append(candidate)
    return names


def _decide_header(first: list[str | None], option: str) -> bool:
    if option != "auto":
        return option == "true"
    cells = [c.strip() for c in first if c is not None and c.strip()]
    return bool(cells) and not any(looks_typed(c) for c in cells)


def non_blank(frame: pl.LazyFrame) -> pl.LazyFrame:
    """``frame`` without rows whose cells are all null or whitespace-only."""
    cols = frame.collect_schema().names()
    if not cols:
        return frame
    return frame.filter(pl.any_horizontal([pl.col(c).str.strip_chars() != "" for c in cols]))


#: Rows per batch of the profiling pass.
PROFILE_BATCH_ROWS = 10_000


def _profile(frame: pl.LazyFrame, cols: list[str]) -> dict[str, int]:
    """Summed :func:`~tabular_worker.cells.profile_exprs` counts plus ``rows``, batch by batch
    (memory bounded by one batch)."""
    totals: dict[str, int] = {"rows": 0}
    aggs = profile_exprs(cols)
    for batch in frame.collect_batches(chunk_size=PROFILE_BATCH_ROWS):
        totals["rows"] += batch.height
        if not aggs:
            continue
        for key, value in batch.select(aggs).row(0, named=True).items():
            totals[key] = totals.get(key, 0) + int(value or 0)
    return totals


def build_table(name: str, frame: pl.LazyFrame, header_option: str) -> Table:
    """Profile ``frame`` (string columns, raw rows in order) into a :class:`Table`.

    Reads the first row, then one pass over all rows in batches (row count, the last
    non-empty column, type counts); memory stays bounded for scanned CSV.
    """
    frame = non_blank(frame)
    cols = frame.collect_schema().names()
    first_frame = frame.head(1).collect()
    first: list[str | None] = list(first_frame.row(0)) if first_frame.height else []
    header = bool(first) and _decide_header(first, header_option)
    counts = _profile(frame, cols)
    if header:  # the header row is not data: take its counts back out
        counts["rows"] -= 1
        for key, value in first_frame.select(profile_exprs(cols)).row(0, named=True).items():
            counts[key] -= int(value or 0)
    rows = counts["rows"]
    used = [
        i
        for i in range(len(cols))
        if counts.get(f"{i}:nonnull", 0) or (header and first[i] is not None)
    ]
    width = used[-1] + 1 if used else 0
    data = (frame.slice(1) if header else frame).select(cols[:width])
    types = choose_types(counts, width)
    names = column_names(first[:width] if header else None, width)

    def batches(chunk_rows: int) -> Iterator[pl.DataFrame]:
        if width == 0 or rows == 0:
            return iter(())
        return data.collect_batches(chunk_size=chunk_rows)

    return Table(name, names, types, rows, header, batches)
