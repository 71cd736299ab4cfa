"""``tabular_worker``: CSV, TSV and XLSX (formats ``csv``, ``tsv``, ``xlsx``), streamed.

**Projection.** One ``TABLE`` node per CSV/TSV file or per worksheet with ``name`` (the file
or sheet name), ``columns`` (the column names) and ``rows`` (data rows; a table is profiled
before it is written, so the node is written once). An XLSX adds one ``WORKBOOK`` node (``name``,
``sheets``: the number of cell sheets read) with ``CONTAINS`` edges to its tables carrying
``ord`` (0-based sheet order). Each data row is one node labelled ``options.label`` (default
``TABLE_ROW``) whose properties are the typed cells keyed by column name plus ``row`` (the
1-based data row number), with a ``CONTAINS`` edge from its table carrying ``ord`` (0-based).
Empty cells are ``null``. Column naming, header detection and blank-row rules:
:mod:`tabular_worker.table`; cell typing, ``dirty_counts`` and day-first/month-first dates:
:mod:`tabular_worker.cells`.

**Canonical text** (:mod:`tabular_worker.projection`): per table a header line (names joined by
TAB; span kind ``heading``, the table's span), then one line per row (cell texts joined by
TAB; span kind ``cell``, the row's span; the span text is exactly the row). Inside a row each
run of tabs in a cell is one space, a quoted cell's line breaks stay (the row then takes
several lines) and an empty cell is nothing; the row's property
keeps the real value (NFC, CRLF → LF). A blank line separates tables.

**Streaming.** ``handle`` is a generator: a partial submission every ``rows_per_partial`` rows
(offsets global, each partial carrying only its new text), the last one with
``partial: False`` and ``stats``: ``rows``, ``columns`` (summed over tables), ``encoding`` and
``delimiter`` (CSV/TSV; ``None`` for XLSX), ``header`` (every table had a header row),
``sheets`` (XLSX: cell sheets read), ``skipped_sheets``, ``tables`` (per table: name, rows,
columns, header, types), ``dirty_counts``, ``ambiguous_dates``, ``ambiguities`` and
``ambiguities_suppressed``. CSV/TSV memory is bounded by the batch (polars scans the file; a
non-UTF-8 file is transcoded to a temporary UTF-8 file first); XLSX streams one sheet at a
time through a temporary spill (:mod:`tabular_worker.xlsx_source`).

**Options.** ``delimiter`` (one character; sniffed among ``, ; \\t |`` when absent; TSV
defaults to tab; a non-ASCII one such as ``÷`` works), ``encoding`` (a codec name; detected
when absent: BOM, UTF-8, a guess with ``stats.encoding_confidence`` —
:mod:`tabular_worker.encoding`), ``header``
(``auto``/``true``/``false``), ``sheets`` (XLSX sheet names; default all), ``rows_per_partial``
(default 10,000), ``label`` (UPPER_SNAKE) and ``clarify`` (emit ambiguities). Anything else, or
a bad value: ``unsupported_feature`` naming the option.

**Failures.** ``corrupt_input``: undecodable text, binary content, a broken ZIP or workbook.
``unsupported_feature``: an encrypted workbook (``encrypted: …``), an invalid option.
``resource_limit``: ZIP-bomb-like parts, a sheet over the cell limit, too many columns
(:mod:`tabular_worker.xlsx_source`, :mod:`tabular_worker.csv_source`). Empty input
(:mod:`workers_common.empty`) is not a failure: one ``TABLE`` with ``rows: 0`` (CSV/TSV) or a
``WORKBOOK`` with ``sheets: 0`` (XLSX), ``stats.empty: true``. ``stats`` also carries
``nul_chars`` (U+0000 dropped from cells), ``ragged_rows``/``ragged_first_rows``
(:mod:`tabular_worker.table`), ``line_ends: "cr"`` (:mod:`tabular_worker.encoding`) and
``warnings`` (:mod:`workers_common.warnings`: ``encoding_guessed`` below the confidence
threshold, ``ragged_rows``, ``truncated`` when the file ends inside a quoted cell, which is
closed and read) when they apply.

Deterministic: identical bytes, options and name give identical submissions. Under another
name the canonical text and the rows are the same; the name appears as the CSV table's and the
workbook's ``name`` and seeds the WORKBOOK/TABLE node ids (uuid5 of the name and position).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack

# Fewer polars threads keep the per-thread CSV buffers (and peak RSS) down. Measured with
# measure.py on a 100 MB, 8-column CSV (1.16M rows): 1 thread 76k rows/s, 321 MB peak RSS;
# 2 threads 87k rows/s, 340 MB; 4 threads 90k rows/s, 454 MB. Core applies about 24k rows/s
# (bench/tabular.py), so the worker is not the bottleneck: one thread.
os.environ.setdefault("POLARS_MAX_THREADS", "1")

from tabular_worker.csv_source import UnclosedQuote, closed_copy, ends_inside_quote, open_csv
from tabular_worker.encoding import Utf8Input, utf8_input
from tabular_worker.options import TabularOptions, parse_options
from tabular_worker.projection import Projector, Submissions
from tabular_worker.table import RAGGED_SHOWN, Table
from tabular_worker.xlsx_source import iter_tables, open_workbook
from workers_common import CorruptInput, Job
from workers_common.empty import is_empty
from workers_common.prefetch import ahead
from workers_common.projection import installed
from workers_common.warnings import Warnings

__all__ = ["FORMATS", "PROJECTION_VERSION", "handle", "parser_versions"]

FORMATS = ("csv", "tsv", "xlsx")
#: How this worker reads bytes (:mod:`workers_common.projection`): raise it whenever the same
#: bytes and options would project differently.
PROJECTION_VERSION = 2


def parser_versions() -> dict[str, str]:
    """The installed versions of the parsers that shape this worker's output:
    polars reads CSV/TSV, chardet guesses legacy encodings."""
    return installed("polars", "chardet")


def _table_stats(tables: list[Table]) -> dict[str, object]:
    out: dict[str, object] = {
        "rows": sum(t.rows for t in tables),
        "columns": sum(len(t.columns) for t in tables),
        "header": all(t.header for t in tables),
        "tables": [
            {
                "name": t.name,
                "rows": t.rows,
                "columns": len(t.columns),
                "header": t.header,
                "types": dict(zip(t.columns, t.types, strict=True)),
            }
            for t in tables
        ],
    }
    ragged = sum(t.ragged_rows for t in tables)
    if ragged:  # the first rows of the first tables that have any
        out["ragged_rows"] = ragged
        out["ragged_first_rows"] = [r for t in tables for r in t.ragged_first][:RAGGED_SHOWN]
    return out


def _identity(job: Job) -> str:
    """What the WORKBOOK/TABLE node ids derive from: the source name (with the table's
    position), never the bytes, so a changed file's tables keep their ids
    (docs/architecture.md, "Versions and node identity")."""
    return job.name


def _open(
    stack: ExitStack, src: Utf8Input, job: Job, opts: TabularOptions
) -> tuple[Table, str, bool]:
    """``open_csv`` on ``src``; a file that ends inside a quoted cell is read again with the
    cell closed (:func:`~tabular_worker.csv_source.closed_copy`): ``(…, truncated=True)``."""
    args = (job.name, job.format, opts.delimiter, src.delimiter_substituted, opts.header)
    try:
        return (*open_csv(src.path, *args), False)
    except UnclosedQuote as exc:
        if not ends_inside_quote(src.path, exc.separator):
            raise
        try:
            return (*open_csv(stack.enter_context(closed_copy(src.path)), *args), True)
        except CorruptInput:
            raise exc from None


def _warnings(src: Utf8Input | None, tables: list[Table], truncated: bool = False) -> Warnings:
    """``stats.warnings`` of a table projection (:mod:`workers_common.warnings`): a doubtful
    encoding guess, ragged rows, a file cut inside a quoted cell."""
    found = Warnings()
    if src is not None and src.guess is not None and src.guess.doubtful:
        found.add("encoding_guessed", 1, src.guess.note())
    ragged = sum(t.ragged_rows for t in tables)
    found.add("ragged_rows", ragged, "rows with cells past the header's width")
    if truncated:
        found.add("truncated", 1, "the file ends inside a quoted cell; the cell was closed")
    return found


def _csv(job: Job) -> Submissions:
    opts = parse_options(job.options)
    with ExitStack() as stack:
        path = stack.enter_context(job.local_path())
        src = stack.enter_context(utf8_input(path, opts.encoding, opts.delimiter))
        table, delimiter, truncated = _open(stack, src, job, opts)
        projector = Projector(
            opts.label, opts.rows_per_partial, opts.clarify, _identity(job), job.root_node_id
        )
        empty = is_empty(job)

        def stats() -> dict[str, object]:
            out = {"encoding": src.encoding, "delimiter": delimiter, **_table_stats([table])}
            if src.guess is not None:
                out["encoding_confidence"] = src.guess.confidence
            _warnings(src, [table], truncated).put(out)
            if src.lone_cr:
                out["line_ends"] = "cr"
            if empty:
                out["empty"] = True
            return out

        yield from projector.run([table], None, stats)


def _xlsx(job: Job) -> Submissions:
    opts = parse_options(job.options)
    if is_empty(job):  # workers_common.empty: the WORKBOOK alone
        projector = Projector(
            opts.label, opts.rows_per_partial, opts.clarify, _identity(job), job.root_node_id
        )
        yield from projector.run(
            [],
            {"name": job.name, "sheets": 0},
            lambda: {
                "encoding": None,
                "delimiter": None,
                "sheets": 0,
                "skipped_sheets": 0,
                **_table_stats([]),
                "empty": True,
            },
        )
        return
    with job.local_path() as path:
        book = open_workbook(path)
        seen: list[Table] = []

        def tables() -> Iterator[Table]:
            for table in iter_tables(book, opts.sheets, opts.header):
                seen.append(table)
                yield table

        def stats() -> dict[str, object]:
            out = {
                "encoding": None,
                "delimiter": None,
                "sheets": len(seen),
                "skipped_sheets": len(book.skipped),
                **_table_stats(seen),
            }
            return _warnings(None, seen).put(out)

        read = [n for n, _ in book.sheets if opts.sheets is None or n in opts.sheets]
        projector = Projector(
            opts.label, opts.rows_per_partial, opts.clarify, _identity(job), job.root_node_id
        )
        yield from projector.run(tables(), {"name": job.name, "sheets": len(read)}, stats)


def handle(job: Job) -> Submissions:
    """Project one CSV, TSV or XLSX job as a stream of submissions (module docstring).

    Yields submission dicts, the last one with ``partial: False``. They are built one partial
    ahead of core's apply (:func:`workers_common.prefetch.ahead`): no partial needs the ids
    core assigned to an earlier one.

    :raises UnsupportedFeature: an invalid option, or an encrypted workbook (``encrypted:``).
    :raises CorruptInput: undecodable or corrupt input.
    :raises ResourceLimit: a ZIP-bomb-like workbook, too many cells or columns.
    """
    return ahead(_xlsx(job) if job.format == "xlsx" else _csv(job))
