"""XLSX input: container checks, limits, sheet kinds, and worksheets as string frames.

Checks before any worksheet is read:

* ``D0 CF 11 E0`` (an OLE/CFB container): a password-encrypted OOXML package (or a legacy
  ``.xls``) → ``unsupported_feature: encrypted: …``. Any other non-ZIP bytes → ``corrupt_input``.
* ZIP bombs: a part whose uncompressed size exceeds :data:`MAX_RATIO` times its compressed
  size (and :data:`RATIO_MIN_BYTES`), or parts totalling more than
  :data:`MAX_UNCOMPRESSED_BYTES` → ``resource_limit``.
* Cell count: a worksheet whose ``<dimension ref>`` covers more than :data:`MAX_CELLS` cells →
  ``resource_limit``; while reading, so is one holding more than :data:`MAX_CELLS` values or
  whose used range (rows × columns) is over it.

Sheets come in workbook order. Chartsheets, dialog sheets and macro sheets hold no cells: they
are skipped and counted in ``stats.skipped_sheets``; so is a worksheet holding a drawing and
no cell at all (how LibreOffice saves a chart sheet, e.g. ``xlsx_03_chartsheet.xlsx``).
Strict OOXML (ISO 29500 namespaces, ``testEXCEL.strict.xlsx``) is read like transitional.
Worksheets are read by :mod:`tabular_worker.xlsx_stream` (a streaming reader of the sheet's
XML part, replacing calamine/fastexcel, which held a whole sheet in memory: ~380 MB for a
30 MB workbook) and render cells as calamine did (numbers without a trailing ``.0``, dates as
ISO ``YYYY-MM-DD HH:MM:SS``; formulas give their cached value; merged ranges keep their value
in the top-left cell only). A date-time at exactly midnight is shown as the date alone (Excel
stores dates as midnight date-times). The reader's batches are spilled to Arrow IPC files in a
temporary folder (one read of the XML; the profiling pass and the data pass of
:func:`tabular_worker.table.build_table` both scan the spill), cut to calamine's range: the
columns from the first to the last one holding a value.
"""

from __future__ import annotations

import re
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from tabular_worker.table import Table, build_table
from tabular_worker.xlsx_stream import SheetStream, read_workbook_info
from workers_common import CorruptInput, ResourceLimit, UnsupportedFeature

__all__ = [
    "MAX_CELLS",
    "MAX_RATIO",
    "MAX_UNCOMPRESSED_BYTES",
    "RATIO_MIN_BYTES",
    "Workbook",
    "open_workbook",
]

#: Largest accepted uncompressed/compressed size ratio of one ZIP part.
MAX_RATIO = 200
#: Parts smaller than this (uncompressed bytes) are exempt from the ratio check.
RATIO_MIN_BYTES = 1 << 20
#: Largest accepted total uncompressed size of all parts (bytes).
MAX_UNCOMPRESSED_BYTES = 1 << 30
#: Largest accepted cell count (rows × columns of the used range) of one worksheet.
MAX_CELLS = 20_000_000
#: Rows per spilled batch (one Arrow IPC file each).
SPILL_BATCH_ROWS = 50_000

_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_CELL_SHEET = re.compile(r"/worksheet$")
_DIMENSION = re.compile(rb'<(?:\w+:)?dimension\s+ref="([A-Z]+)(\d+)(?::([A-Z]+)(\d+))?"')
_CELL = re.compile(rb"<(?:\w+:)?c[\s>/]")
_MIDNIGHT = r"^(\d{4}-\d{2}-\d{2}) 00:00:00$"


@dataclass(frozen=True, slots=True)
class Workbook:
    """An opened workbook.

    :ivar sheets: ``(name, zip part or None)`` of every cell sheet, in workbook order.
    :ivar skipped: names of sheets without cells (chartsheets, …).
    """

    path: Path
    sheets: list[tuple[str, str | None]]
    skipped: list[str]


def _check_container(path: Path) -> zipfile.ZipFile:
    with path.open("rb") as f:
        magic = f.read(8)
    if magic.startswith(_CFB):
        raise UnsupportedFeature("encrypted: the workbook is an OLE/CFB container (password)")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise CorruptInput(f"not an XLSX (ZIP) package: {exc}") from None
    total = 0
    for info in zf.infolist():
        total += info.file_size
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_MIN_BYTES and ratio > MAX_RATIO:
            zf.close()
            raise ResourceLimit(
                f"zip part {info.filename} expands {ratio:.0f}x (limit {MAX_RATIO}x)"
            )
    if total > MAX_UNCOMPRESSED_BYTES:
        zf.close()
        raise ResourceLimit(f"zip parts total {total} bytes (limit {MAX_UNCOMPRESSED_BYTES})")
    return zf


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _sheet_parts(zf: zipfile.ZipFile) -> list[tuple[str, str | None, bool]]:
    """``(name, part, has cells)`` per sheet of ``xl/workbook.xml``, in order."""
    try:
        book = ET.fromstring(zf.read("xl/workbook.xml"))
        rels = ET.fromstring(zf.read("xl/_rels/workbook.xml.rels"))
    except (KeyError, ET.ParseError) as exc:
        raise CorruptInput(f"XLSX workbook part unreadable: {exc}") from None
    targets = {
        r.get("Id"): (r.get("Type") or "", r.get("Target") or "")
        for r in rels.iter()
        if _local(r.tag) == "Relationship"
    }
    out = []
    for el in book.iter():
        if _local(el.tag) != "sheet":
            continue
        rid = next((v for k, v in el.attrib.items() if _local(k) == "id"), None)
        kind, target = targets.get(rid, ("", ""))
        part = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
        out.append((el.get("name") or "", part if target else None, bool(_CELL_SHEET.search(kind))))
    return out


def _is_chart_only(zf: zipfile.ZipFile, part: str | None) -> bool:
    """A worksheet holding a drawing and no cell (how LibreOffice writes a chart sheet)."""
    if part is None:
        return False
    folder, _, base = part.rpartition("/")
    try:
        rels = zf.read(f"{folder}/_rels/{base}.rels")
    except KeyError:
        return False
    if b"/drawing" not in rels:
        return False
    tail = b""
    with zf.open(part) as f:
        while chunk := f.read(1 << 16):
            if _CELL.search(tail + chunk):
                return False
            tail = chunk[-16:]
    return True


def _dimension_cells(zf: zipfile.ZipFile, part: str | None) -> int | None:
    if part is None:
        return None
    try:
        with zf.open(part) as f:
            head = f.read(4096)
    except KeyError:
        return None
    m = _DIMENSION.search(head)
    if not m or not m.group(3):
        return None

    def col(letters: bytes) -> int:
        n = 0
        for ch in letters:
            n = n * 26 + ch - 64
        return n

    rows = int(m.group(4)) - int(m.group(2)) + 1
    cols = col(m.group(3)) - col(m.group(1)) + 1
    return max(rows, 0) * max(cols, 0)


def open_workbook(path: Path) -> Workbook:
    """Check the package at ``path`` (module docstring) and list its sheets.

    :raises UnsupportedFeature: ``encrypted: …``.
    :raises CorruptInput: not a readable XLSX.
    :raises ResourceLimit: a ZIP-bomb-like part or a sheet over :data:`MAX_CELLS` cells.
    """
    with _check_container(path) as zf:
        sheets, skipped = [], []
        for name, part, cells in _sheet_parts(zf):
            if not cells or _is_chart_only(zf, part):
                skipped.append(name)
                continue
            count = _dimension_cells(zf, part)
            if count is not None and count > MAX_CELLS:
                raise ResourceLimit(f"sheet {name!r} has {count} cells (limit {MAX_CELLS})")
            sheets.append((name, part))
    return Workbook(path, sheets, skipped)


def _spill(stream: SheetStream, name: str, folder: Path) -> pl.LazyFrame:
    """Read the sheet once, writing its batches to Arrow IPC files under ``folder``; the lazy
    frame over them has calamine's shape: the used range's columns (``c0`` = its first
    column), one row per sheet row holding a value (empty rows in between, which calamine
    keeps as all-null rows, are dropped later anyway)."""
    files: list[tuple[Path, int]] = []
    try:
        for i, batch in enumerate(stream.batches(SPILL_BATCH_ROWS)):
            if stream.cells > MAX_CELLS:
                raise ResourceLimit(f"sheet {name!r} has over {MAX_CELLS} cells")
            path = folder / f"{i}.arrow"
            batch.write_ipc(path, compression="uncompressed")
            files.append((path, batch.width))
    except (
        ET.ParseError,
        UnicodeDecodeError,
        pl.exceptions.PolarsError,
        zipfile.BadZipFile,
    ) as exc:
        raise CorruptInput(f"sheet {name!r} unreadable: {str(exc).splitlines()[0]}") from None
    if not files:
        return pl.DataFrame().lazy()
    lo, hi = stream.first_col, stream.last_col
    cells = (stream.last_row - stream.first_row + 1) * (hi - lo + 1)
    if cells > MAX_CELLS:
        raise ResourceLimit(f"sheet {name!r} has {cells} cells")
    parts = [
        pl.scan_ipc(path).select(
            [
                (pl.col(f"c{j}") if j < width else pl.lit(None, pl.String)).alias(f"c{j - lo}")
                for j in range(lo, hi + 1)
            ]
        )
        for path, width in files
    ]
    frame = pl.concat(parts, how="vertical")
    return frame.select(pl.all().str.replace(_MIDNIGHT, "$1"))


def iter_tables(book: Workbook, wanted: tuple[str, ...] | None, header: str) -> Iterator[Table]:
    """The cell sheets of ``book`` (only ``wanted`` ones when given), as tables, read one at
    a time by :mod:`tabular_worker.xlsx_stream` and spilled to a temporary folder (removed
    when the next table is asked for or the iteration ends).

    :raises UnsupportedFeature: ``sheets: …`` names a sheet the workbook lacks.
    :raises CorruptInput: a malformed part.
    :raises ResourceLimit: a sheet over :data:`MAX_CELLS` cells.
    """
    parts = dict(book.sheets)
    names = list(parts)
    if wanted is not None:
        missing = [w for w in wanted if w not in names and w not in book.skipped]
        if missing:
            raise UnsupportedFeature(f"sheets: no cell sheet named {missing[0]!r}")
        names = [n for n in names if n in wanted]
    try:
        zf = zipfile.ZipFile(book.path)
        info = read_workbook_info(zf)
    except (zipfile.BadZipFile, ET.ParseError, UnicodeDecodeError) as exc:
        raise CorruptInput(f"XLSX unreadable: {str(exc).splitlines()[0]}") from None
    with zf:
        for name in names:
            part = parts[name]
            with tempfile.TemporaryDirectory(prefix="telha-xlsx-") as folder:
                text_typed: dict[str, int] = {}
                if part is None or part not in zf.NameToInfo:
                    frame = pl.DataFrame().lazy()
                else:
                    stream = SheetStream(zf, part, info)
                    frame = _spill(stream, name, Path(folder))
                    for key, n in stream.text_typed.items():  # sheet column → table column
                        col, kind = key.split(":")
                        text_typed[f"{int(col) - stream.first_col}:{kind}"] = n
                yield build_table(name, frame, header, text_typed)
