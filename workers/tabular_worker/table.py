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
are dropped. A data row with a value past the header's last cell (past the first row's, when
there is no header) keeps that value and is counted: ``stats.ragged_rows`` and the first
:data:`RAGGED_SHOWN` of their ``row`` numbers in ``stats.ragged_first_rows``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import polars as pl

from tabular_worker.cells import DateVotes, choose_types, column_votes, profile_exprs

__all__ = ["RAGGED_SHOWN", "Table", "build_table", "column_names", "looks_typed"]

#: How many ragged rows' numbers ``stats.ragged_first_rows`` lists.
RAGGED_SHOWN = 10

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
    :ivar votes: per column, the whole column's day-first/month-first date evidence.
    :ivar ragged_rows: data rows with values past the header's (or first row's) width.
    :ivar ragged_first: the ``row`` numbers of the first :data:`RAGGED_SHOWN` of them.
    """

    name: str
    columns: list[str]
    types: list[str]
    rows: int
    header: bool
    batches: Callable[[int], Iterator[pl.DataFrame]]
    votes: list[DateVotes]
    ragged_rows: int = 0
    ragged_first: tuple[int, ...] = ()


def looks_typed(value: str) -> bool:
    """Whether a (stripped) cell text reads as bool, number, date or datetime."""
    return bool(_TYPED.match(value))


def _clean_name(value: str | None) -> str:
    if value is None:
        return ""
    text = unicodedata.normalize("NFC", value.replace("\x00", ""))
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


def _profile(frame: pl.LazyFrame, cols: list[str], wide: pl.Expr | None) -> dict[str, int]:
    """Summed :func:`~tabular_worker.cells.profile_exprs` counts plus ``rows``, batch by batch
    (memory bounded by one batch); with ``wide`` (a row condition) also ``wide`` (rows
    meeting it: ``wide_all``; the frame indexes of the first :data:`RAGGED_SHOWN`:
    ``wide:<k>``, ``wide`` of them)."""
    totals: dict[str, int] = {"rows": 0, "wide": 0}
    aggs = profile_exprs(cols)
    for batch in frame.collect_batches(chunk_size=PROFILE_BATCH_ROWS):
        offset = totals["rows"]
        totals["rows"] += batch.height
        if not aggs:
            continue
        for key, value in batch.select(aggs).row(0, named=True).items():
            totals[key] = totals.get(key, 0) + int(value or 0)
        if wide is not None:
            hits = batch.select(wide.fill_null(False).alias("w"))["w"].arg_true()
            for index in hits.head(RAGGED_SHOWN - totals["wide"]).to_list():
                totals[f"wide:{totals['wide']}"] = offset + index
                totals["wide"] += 1
            totals["wide_all"] = totals.get("wide_all", 0) + hits.len()
    return totals


def build_table(
    name: str, frame: pl.LazyFrame, header_option: str, text_typed: dict[str, int] | None = None
) -> Table:
    """Profile ``frame`` (string columns, raw rows in order) into a :class:`Table`.

    :param text_typed: ``"<column index>:<type>"`` → cells of that column the file itself
        stores as text although they look typed (XLSX strings such as ``'45000`` or
        ``00123``): they do not vote for that type, so a column the workbook keeps as text
        stays text (leading zeros kept) while numbers stored as numbers type theirs.

    Reads the first row, then one pass over all rows in batches (row count, the last
    non-empty column, type counts); memory stays bounded for scanned CSV.
    """
    frame = non_blank(frame)
    cols = frame.collect_schema().names()
    first_frame = frame.head(1).collect()
    first: list[str | None] = list(first_frame.row(0)) if first_frame.height else []
    header = bool(first) and _decide_header(first, header_option)
    filled = [i for i, v in enumerate(first) if v is not None]
    ref = filled[-1] + 1 if filled else 0
    wide = None
    if first and ref < len(cols):
        wide = pl.any_horizontal([pl.col(c).str.strip_chars() != "" for c in cols[ref:]])
    counts = _profile(frame, cols, wide)
    if header:  # the header row is not data: take its counts back out
        counts["rows"] -= 1
        for key, value in first_frame.select(profile_exprs(cols)).row(0, named=True).items():
            counts[key] -= int(value or 0)
    for key, n in (text_typed or {}).items():
        if key in counts:
            counts[key] = max(0, counts[key] - n)
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

    shown = tuple(
        counts[f"wide:{k}"] + (0 if header else 1) for k in range(min(counts["wide"], RAGGED_SHOWN))
    )
    votes = column_votes(counts, width)
    return Table(name, names, types, rows, header, batches, votes, counts.get("wide_all", 0), shown)
