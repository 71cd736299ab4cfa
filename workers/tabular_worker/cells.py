"""Cell typing: per-column type inference and per-batch typed values, as polars expressions.

The patterns are :mod:`workers_common.cell_types`' (docling tables are typed by the same
rules). Every cell arrives as a string (``null`` when empty). Text is normalized like canonical text
(NFC, CRLF and lone CR → LF) before anything else.

**Type inference** (once per table, over all its data rows, batch by batch): each non-empty
cell (stripped of surrounding whitespace) is tested against ``bool`` (``true``/``false``, any
case), ``int`` (``[+-]digits``), ``float`` (decimal or scientific; ints count too), ``date`` (ISO
``YYYY-MM-DD``, numeric ``a/b/yyyy`` or ``a-b-yyyy``, dotted ``d.m.yyyy``) and ``datetime``
(ISO date, ``T`` or space, ``HH:MM[:SS[.f]]``, optional ``Z``/offset). The column takes the type
with the most matching cells (ties go to the narrower type, in that order) when it matches more
than half of the column's non-empty cells; otherwise it is ``string``.

**Typed values**: ``int`` → int, ``float`` → float, ``bool`` → bool, ``date`` → ISO
``YYYY-MM-DD`` string, ``datetime`` → ISO string with ``T`` (seconds kept as written),
``string`` → the normalized text. A non-empty cell that does not fit its column's type is kept
as its normalized text and counted in ``dirty_counts[type]``.

**Day-first/month-first** (docs/formats.md, "Temporal ambiguity"): a numeric ``a/b/yyyy`` or
``a-b-yyyy`` cell with ``a > 12`` is evidence for day-first, one with ``b > 12`` evidence for
month-first. The evidence of the *whole column* (counted in the profiling pass,
:func:`profile_exprs`, before any row is written) decides how every other numeric cell of the
column is read, the same for every row: more day-first than month-first votes → day-first,
fewer → month-first, equal (including none) → month-first, and then a cell is *ambiguous*
when ``a != b`` (both readings are valid dates). So ``01/02/2024`` above ``13/02/2024`` is
2024-02-01, like the rows after it: one column, one convention. Dotted ``d.m.yyyy`` is
day-first by convention and never ambiguous.

**NUL**: U+0000 is dropped from cell text (:mod:`workers_common.canonical`) and counted
(:func:`nul_count_expr`, ``stats.nul_chars``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from workers_common.cell_types import BOOL, DATETIME, FLOAT, INT, ISO_DATE, NUM_DATE, PATTERNS

__all__ = [
    "TYPES",
    "Ambiguous",
    "DateVotes",
    "TypedColumn",
    "choose_types",
    "column_votes",
    "display_expr",
    "normalize_expr",
    "nul_count_expr",
    "profile_exprs",
    "type_columns",
]

#: Column types, narrowest first (the tie-break order of inference).
TYPES = ("bool", "int", "float", "date", "datetime", "string")

_BOOL = BOOL
_INT = INT
_FLOAT = FLOAT
_ISO_DATE = ISO_DATE
_NUM_DATE = NUM_DATE
_DATETIME = DATETIME
_PATTERNS = PATTERNS


def normalize_expr(e: pl.Expr) -> pl.Expr:
    """Cell text as canonical text: U+0000 dropped, NFC, CRLF and lone CR → LF (nulls stay
    null)."""
    return (
        e.str.replace_all("\x00", "", literal=True)
        .str.normalize("NFC")
        .str.replace_all("\r\n", "\n", literal=True)
        .str.replace_all("\r", "\n", literal=True)
    )


def display_expr(e: pl.Expr) -> pl.Expr:
    """A normalized cell as it appears in its row's canonical text: each run of tabs becomes
    one space (TAB separates cells), line breaks stay (a quoted cell's lines are part of what
    was read), null becomes the empty string."""
    return e.str.replace_all(r"\t+", " ").fill_null("")


def nul_count_expr(e: pl.Expr) -> pl.Expr:
    """U+0000 characters in a raw cell (0 for null)."""
    return e.str.count_matches("\x00", literal=True).fill_null(0)


_NUM_AB = r"^(\d{1,2})[/-](\d{1,2})[/-]\d{4}$"


def profile_exprs(columns: list[str]) -> list[pl.Expr]:
    """Aggregations counting, per column, non-null cells (``i:nonnull``), non-empty cells
    (``i:n``), cells matching each type (``i:<type>``) and day-first/month-first evidence
    (``i:ev_df``, ``i:ev_mf``: numeric dates with ``a > 12``, ``b > 12``); summed over batches
    they feed :func:`choose_types` and :func:`column_votes`."""
    aggs: list[pl.Expr] = []
    for i, c in enumerate(columns):
        s = pl.col(c).str.strip_chars()
        present = s.str.len_bytes() > 0
        aggs.append(pl.col(c).is_not_null().sum().alias(f"{i}:nonnull"))
        aggs.append(present.sum().alias(f"{i}:n"))
        for t, pattern in _PATTERNS.items():
            aggs.append((present & s.str.contains(pattern)).sum().alias(f"{i}:{t}"))
        a = s.str.extract(_NUM_AB, 1).cast(pl.Int32, strict=False)
        b = s.str.extract(_NUM_AB, 2).cast(pl.Int32, strict=False)
        ev_df = (a > 12) & (a <= 31) & (b >= 1) & (b <= 12)
        ev_mf = (b > 12) & (b <= 31) & (a >= 1) & (a <= 12)
        aggs.append(ev_df.fill_null(False).sum().alias(f"{i}:ev_df"))
        aggs.append(ev_mf.fill_null(False).sum().alias(f"{i}:ev_mf"))
    return aggs


def column_votes(counts: dict[str, int], width: int) -> list[DateVotes]:
    """Each column's whole-column day-first/month-first evidence from summed
    :func:`profile_exprs` counts."""
    return [
        DateVotes(counts.get(f"{i}:ev_df", 0), counts.get(f"{i}:ev_mf", 0)) for i in range(width)
    ]


def choose_types(counts: dict[str, int], width: int) -> list[str]:
    """One type of :data:`TYPES` per column from summed :func:`profile_exprs` counts, by the
    rule of the module docstring."""
    types = []
    for i in range(width):
        n = counts.get(f"{i}:n", 0)
        best, best_count = "string", 0
        for t in _PATTERNS:
            k = counts.get(f"{i}:{t}", 0)
            if k > best_count:
                best, best_count = t, k
        types.append(best if best_count * 2 > n else "string")
    return types


@dataclass(slots=True)
class DateVotes:
    """Day-first and month-first evidence of one whole column (from the profiling pass)."""

    day_first: int = 0
    month_first: int = 0


@dataclass(frozen=True, slots=True)
class Ambiguous:
    """A cell read month-first without evidence: row index in its batch and both readings
    (ISO dates)."""

    row: int
    month_first: str
    day_first: str


@dataclass(slots=True)
class TypedColumn:
    """One column of one batch: Python values (typed, or the text when dirty), the number of
    dirty cells, and ambiguous date cells."""

    values: list[object]
    dirty: int = 0
    ambiguous: list[Ambiguous] = field(default_factory=list)


def _iso(y: pl.Expr, m: pl.Expr, d: pl.Expr) -> pl.Expr:
    text = pl.concat_str(
        [y, m.cast(pl.String).str.zfill(2), d.cast(pl.String).str.zfill(2)], separator="-"
    )
    return pl.when(text.str.to_date("%Y-%m-%d", strict=False).is_not_null()).then(text)


def _dates(s: pl.Series, votes: DateVotes) -> tuple[pl.Series, list[Ambiguous]]:
    """ISO values of a date column's batch (null where invalid) and its ambiguous cells, read
    by the whole column's ``votes``."""
    frame = pl.DataFrame({"s": s.str.strip_chars()})
    g = pl.col("s").str.extract_groups(_NUM_DATE)
    a = g.struct.field("1").cast(pl.Int32)
    b = g.struct.field("3").cast(pl.Int32)
    y = g.struct.field("5")
    sep_ok = g.struct.field("2") == g.struct.field("4")
    frame = frame.with_columns(
        num=(sep_ok & (g.struct.field("2") != ".")).fill_null(False),
        dot=(sep_ok & (g.struct.field("2") == ".")).fill_null(False),
        a=a,
        b=b,
        mf=_iso(y, a, b),
        df=_iso(y, b, a),
        iso=pl.when(pl.col("s").str.contains(_ISO_DATE)).then(
            _iso(
                pl.col("s").str.slice(0, 4),
                pl.col("s").str.slice(5, 2).cast(pl.Int32, strict=False),
                pl.col("s").str.slice(8, 2).cast(pl.Int32, strict=False),
            )
        ),
    )
    ev_df = pl.col("num") & (pl.col("a") > 12) & pl.col("df").is_not_null()
    ev_mf = pl.col("num") & (pl.col("b") > 12) & pl.col("mf").is_not_null()
    frame = frame.with_columns(ev_df=ev_df.fill_null(False), ev_mf=ev_mf.fill_null(False))
    unresolved = pl.col("num") & ~pl.col("ev_df") & ~pl.col("ev_mf")
    column_day_first = votes.day_first > votes.month_first
    day_first = pl.col("dot") | pl.col("ev_df") | (unresolved & pl.lit(column_day_first))
    tie = unresolved & pl.lit(votes.day_first == votes.month_first)
    out = frame.select(
        value=pl.coalesce(
            pl.col("iso"),
            pl.when(pl.col("num") | pl.col("dot")).then(
                pl.when(day_first).then(pl.col("df")).otherwise(pl.col("mf"))
            ),
        ),
        ambiguous=(
            tie
            & (pl.col("a") != pl.col("b"))
            & pl.col("mf").is_not_null()
            & pl.col("df").is_not_null()
        ).fill_null(False),
        mf=pl.col("mf"),
        df=pl.col("df"),
    )
    amb = out.with_row_index("i").filter(pl.col("ambiguous"))
    cells = [Ambiguous(i, mf, df) for i, mf, df in amb.select("i", "mf", "df").iter_rows()]
    return out["value"], cells


def _typed(s: pl.Series, kind: str) -> pl.Series:
    t = s.str.strip_chars()
    if kind == "bool":
        return pl.select(pl.when(t.str.contains(_BOOL)).then(t.str.to_lowercase() == "true"))[:, 0]
    if kind == "int":
        return pl.select(pl.when(t.str.contains(_INT)).then(t.str.to_integer(strict=False)))[:, 0]
    if kind == "float":
        v = pl.select(pl.when(t.str.contains(_FLOAT)).then(t.cast(pl.Float64, strict=False)))
        return v.select(pl.when(pl.col(v.columns[0]).is_finite()).then(pl.col(v.columns[0])))[:, 0]
    if kind == "datetime":
        ok = (
            t.str.contains(_DATETIME)
            & t.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False).is_not_null()
        )
        return pl.select(pl.when(ok).then(t.str.replace(" ", "T", literal=True)))[:, 0]
    return s


def type_columns(
    frame: pl.DataFrame, types: list[str], votes: list[DateVotes]
) -> list[TypedColumn]:
    """Typed Python values of each (normalized) string column of one batch.

    :param types: the inferred type of each column (:func:`infer_types`).
    :param votes: per-column day-first/month-first evidence of the whole column.
    """
    out = []
    for i, kind in enumerate(types):
        s = frame[:, i]
        ambiguous: list[Ambiguous] = []
        if kind == "string":
            out.append(TypedColumn(s.to_list()))
            continue
        if kind == "date":
            typed, ambiguous = _dates(s, votes[i])
        else:
            typed = _typed(s, kind)
        values = typed.to_list()
        dirty_mask = s.is_not_null() & typed.is_null() & (s.str.strip_chars() != "")
        dirty = int(dirty_mask.sum())
        if dirty:
            text = s.to_list()
            for j in dirty_mask.arg_true().to_list():
                values[j] = text[j]
        out.append(TypedColumn(values, dirty, ambiguous))
    return out
