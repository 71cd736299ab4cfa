"""CSV/TSV input: comment lines, delimiter sniffing and a lazy polars scan of string columns.

* Lines starting with ``#`` (and blank lines) before the first row are skipped; later lines
  starting with ``#`` are data.
* The delimiter is ``options.delimiter``, else a tab for TSV, else sniffed among ``,`` ``;``
  ``\\t`` ``|`` on the first :data:`SNIFF_LINES` lines (quotes respected): the candidate giving
  the most rows with the same field count (more than one field) wins, ties in that order; no
  winner means ``,``. A non-ASCII delimiter was already replaced by U+001F while transcoding
  (:mod:`tabular_worker.encoding`) and is put back in cell text here.
* CSV quoting is RFC 4180 (``"``, doubled to escape); embedded newlines stay in the cell.
* TSV has no quoting convention: a ``"`` is data (``5'9" tall``, ``"Best" seller``, an
  unclosed quote), and a record is one line.
* TSV's ``\\N`` (the PostgreSQL/MySQL dump null marker) is null.
* Every cell is read as a string; typing happens later (:mod:`tabular_worker.cells`).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from tabular_worker.encoding import SUBSTITUTE
from tabular_worker.table import Table, build_table
from workers_common import CorruptInput, ResourceLimit

__all__ = [
    "HEAD_BYTES", "MAX_COLUMNS", "SNIFF_LINES", "UnclosedQuote", "closed_copy",
    "ends_inside_quote", "open_csv", "sniff_delimiter",
]  # fmt: skip

#: Bytes of the file read to find comment lines and sniff the delimiter.
HEAD_BYTES = 64 * 1024
#: Lines used for delimiter sniffing.
SNIFF_LINES = 50
#: Most columns a CSV/TSV row may have (over it: ResourceLimit).
MAX_COLUMNS = 16_384

_CANDIDATES = (",", "\t", ";", "|")


class UnclosedQuote(CorruptInput):
    """A quoted CSV cell is never closed: the file may end inside it (cut short).

    :ivar separator: the field separator the file was parsed with.
    """

    def __init__(self, message: str, separator: str) -> None:
        super().__init__(message)
        self.separator = separator


def ends_inside_quote(path: Path, separator: str) -> bool:
    """Whether the UTF-8 CSV at ``path`` is well quoted (RFC 4180, strictly) up to an end that
    falls inside a quoted cell: a file cut short, not a stray quote (a full read, done only
    once polars has failed)."""
    with path.open(encoding="utf-8", newline="") as f:
        try:
            for _ in csv.reader(f, delimiter=separator, strict=True):
                pass
        except csv.Error as exc:
            return "unexpected end of data" in str(exc)
    return False


@contextmanager
def closed_copy(path: Path) -> Iterator[Path]:
    """A temporary copy of the UTF-8 file at ``path`` with a ``"`` appended, which closes a
    quoted cell the file ends inside (docs/formats.md, "Warnings": ``truncated``)."""
    fd, name = tempfile.mkstemp(prefix="telha-tabular-", suffix=".csv")
    try:
        with os.fdopen(fd, "wb") as out, path.open("rb") as src:
            shutil.copyfileobj(src, out)
            out.write(b'"\n')
        yield Path(name)
    finally:
        os.unlink(name)


def _head(path: Path) -> str:
    with path.open("rb") as f:
        data = f.read(HEAD_BYTES)
    return data.decode("utf-8", errors="ignore")


def _comment_lines(head: str) -> int:
    count = 0
    for line in head.splitlines(keepends=True):
        if not line.endswith(("\n", "\r")):
            break  # possibly cut by HEAD_BYTES
        if line.startswith("#") or not line.strip():
            count += 1
        else:
            break
    return count


def _rows(text: str, delimiter: str, quoted: bool = True) -> list[list[str]]:
    try:
        if quoted:
            reader = csv.reader(io.StringIO(text), delimiter=delimiter, strict=False)
        else:
            reader = csv.reader(
                io.StringIO(text), delimiter=delimiter, strict=False, quoting=csv.QUOTE_NONE
            )
        return [row for _, row in zip(range(SNIFF_LINES), reader, strict=False) if row]
    except csv.Error:
        return []


def sniff_delimiter(text: str) -> str:
    """The delimiter among ``, \\t ; |`` that splits the first lines of ``text`` most
    consistently (rule in the module docstring)."""
    lines = text.splitlines(keepends=True)
    if len(lines) > 1 and not text.endswith(("\n", "\r")):
        lines = lines[:-1]  # the last line may be cut
    sample = "".join(lines[:SNIFF_LINES])
    best, best_score = ",", (0, 0)
    for candidate in _CANDIDATES:
        counts = [len(r) for r in _rows(sample, candidate)]
        widths = [n for n in counts if n > 1]
        if not widths:
            continue
        mode = max(sorted(set(widths)), key=widths.count)
        score = (widths.count(mode), mode)
        if score > best_score:
            best, best_score = candidate, score
    return best


def _max_fields(text: str, delimiter: str, quoted: bool) -> int:
    return max((len(r) for r in _rows(text, delimiter, quoted)), default=1)


def _scan(
    path: Path,
    separator: str,
    skip: int,
    width: int,
    null_values: list[str] | None,
    quoted: bool,
) -> pl.LazyFrame:
    return pl.scan_csv(
        path,
        has_header=False,
        separator=separator,
        quote_char='"' if quoted else None,
        skip_lines=skip,
        schema={f"column_{i + 1}": pl.String for i in range(width)},
        missing_columns="insert",
        null_values=null_values,
        raise_if_empty=False,
    )


def open_csv(
    path: Path,
    name: str,
    fmt: str,
    delimiter: str | None,
    substituted: bool,
    header_option: str,
) -> tuple[Table, str]:
    """Profile the UTF-8 file at ``path`` as one :class:`Table`; returns it and the delimiter.

    :param delimiter: ``options.delimiter`` (``None`` to sniff or, for TSV, tab).
    :param substituted: a non-ASCII delimiter was replaced by U+001F in the file.
    :raises ResourceLimit: a row has more than :data:`MAX_COLUMNS` fields.
    :raises UnclosedQuote: a quoted cell is never closed (the file may be cut short).
    :raises CorruptInput: polars cannot parse the file.
    """
    head = _head(path)
    skip = _comment_lines(head)
    body = "".join(head.splitlines(keepends=True)[skip:])
    if delimiter is None:
        delimiter = "\t" if fmt == "tsv" else sniff_delimiter(body)
    separator = SUBSTITUTE if substituted else delimiter
    if len(separator.encode()) != 1:
        raise CorruptInput(f"delimiter: {delimiter!r} needs transcoding (internal error)")
    null_values = ["\\N"] if fmt == "tsv" else None
    quoted = fmt != "tsv"
    width = _max_fields(body, separator, quoted)
    while True:
        frame = _scan(path, separator, skip, width, null_values, quoted)
        if substituted:
            frame = frame.select(pl.all().str.replace_all(SUBSTITUTE, delimiter, literal=True))
        try:
            return build_table(name, frame, header_option), delimiter
        except pl.exceptions.ComputeError as exc:
            if quoted and "not properly escaped" in str(exc):
                raise UnclosedQuote(
                    f"unparseable {fmt}: a quoted cell is never closed", separator
                ) from None
            if "more fields" not in str(exc):
                raise CorruptInput(f"unparseable {fmt}: {exc}".splitlines()[0]) from None
            if width >= MAX_COLUMNS:
                raise ResourceLimit(f"a row has more than {MAX_COLUMNS} fields") from None
            width = min(width * 4, MAX_COLUMNS)
