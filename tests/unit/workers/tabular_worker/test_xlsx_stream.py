"""tabular_worker.xlsx_stream: the streaming worksheet reader gives, cell for cell, what
calamine (fastexcel, ``dtypes="string"``) gives — on every corpus workbook, on generated ones
(normal and ``constant_memory`` xlsxwriter, the 1904 date system) and on hand-written sheet XML
(no ``r`` attributes, prefixed tags, rich and phonetic text, entities, CDATA, ``t="d"``, rows
beyond ``<dimension>``), through the fast (regex) path and the ElementTree path alike.

Rows that are empty in calamine's range are left out of the comparison: the reader skips
them and :func:`tabular_worker.table.non_blank` drops them anyway.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

import fastexcel
import polars as pl
import pytest
import xlsxwriter
from tabular_worker import xlsx_stream
from tabular_worker.xlsx_source import open_workbook
from tabular_worker.xlsx_stream import SheetStream, is_date_format, read_workbook_info

from tests.conftest import CORPUS

Rows = list[tuple[str | None, ...]]


def _stream_rows(path: Path, part: str) -> Rows:
    with zipfile.ZipFile(path) as zf:
        stream = SheetStream(zf, part, read_workbook_info(zf))
        batches = list(stream.batches(7))
    if not batches:
        return []
    frame = pl.concat(batches, how="diagonal")
    cols = [f"c{j}" for j in range(stream.first_col, stream.last_col + 1)]
    frame = frame.select(
        [pl.col(c) if c in frame.columns else pl.lit(None, pl.String).alias(c) for c in cols]
    )
    return [r for r in frame.iter_rows() if any(x is not None for x in r)]


def _calamine_rows(path: Path, name: str) -> Rows:
    sheet = fastexcel.read_excel(str(path)).load_sheet(name, header_row=None, dtypes="string")
    frame = sheet.to_polars().select(pl.all().cast(pl.String))
    return [r for r in frame.iter_rows() if any(x is not None for x in r)]


def _assert_same(path: Path) -> None:
    book = open_workbook(path)
    assert book.sheets
    for name, part in book.sheets:
        assert part is not None
        assert _stream_rows(path, part) == _calamine_rows(path, name), name


@pytest.fixture(params=["fast", "elementtree"])
def path_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each comparison through the regex path and, forced, through ElementTree."""
    if request.param == "elementtree":
        monkeypatch.setattr(xlsx_stream, "_fast_cells", lambda block: None)
    return str(request.param)


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (CORPUS / "xlsx").iterdir() if p.name != "protectedFile.xlsx"),
)
def test_corpus_workbooks_read_as_calamine_reads_them(name: str, path_kind: str) -> None:
    _assert_same(CORPUS / "xlsx" / name)


def _generated(path: Path, options: dict[str, bool]) -> Path:
    book = xlsxwriter.Workbook(str(path), options)
    sheet = book.add_worksheet("S")
    date = book.add_format({"num_format": "yyyy-mm-dd"})
    stamp = book.add_format({"num_format": "yyyy-mm-dd hh:mm:ss"})
    clock = book.add_format({"num_format": "hh:mm:ss"})
    hours = book.add_format({"num_format": "[h]:mm:ss"})
    quoted = book.add_format({"num_format": '"d" 0.00'})
    builtin = book.add_format({"num_format": 14})
    percent = book.add_format({"num_format": "0.00%"})
    sheet.write_row(0, 1, ["id", "text", "number", "when", "flag"])
    numbers = [1, 1.0, 2.5, -3, 1e20, 1e-7, 0.1 + 0.2, -0.0, 123456789012345678, 1.5e300]
    numbers += [1e16, 12345.678, 1 / 3, 6.6e-05, 0]
    for i, n in enumerate(numbers, start=1):
        sheet.write_number(i, 1, i)
        sheet.write_string(i, 2, f"text {i} é & <b> \"q\" 'a'")
        sheet.write_number(i, 3, n)
        sheet.write_boolean(i, 5, i % 2 == 0)
    when: list[tuple[object, object]] = [
        (dt.datetime(2024, 1, 1), date),
        (dt.datetime(2024, 1, 1, 10, 30, 45), stamp),
        (dt.datetime(2024, 1, 1), stamp),
        (dt.datetime(2024, 1, 1, 10, 30, 45, 500000), stamp),
        (dt.time(12, 0), clock),
        (dt.timedelta(hours=30), hours),
        (45000.25, date),
        (45000.123456789, stamp),
        (0, date),
        (1, date),
        (59, date),
        (60, date),
        (61, date),
        (-1, date),
        (1.5, quoted),
        (0.25, percent),
        (45292, builtin),
    ]
    for i, (value, fmt) in enumerate(when, start=1):
        if isinstance(value, (int, float)):
            sheet.write_number(i, 4, value, fmt)
        else:
            sheet.write_datetime(i, 4, value, fmt)
    row = len(when) + 2
    sheet.write_formula(row, 1, "=1+1", None, 2)
    sheet.write_formula(row, 2, '="a"&"b"', None, "ab")
    sheet.write_formula(row, 3, "=1/0", None, "#DIV/0!")
    sheet.write_formula(row, 4, "=TRUE()", None, True)
    sheet.write_string(row + 1, 2, "ctl\x01 _x000D_ crlf\r\nend")
    sheet.write_string(row + 2, 2, "  spaced  ")
    sheet.write_blank(row + 3, 0, None, date)  # a styled empty cell: no value, no column
    sheet.write_string(row + 4, 7, "")  # an empty string is a value
    sheet.merge_range(row + 5, 2, row + 6, 3, "merged")
    sheet.write_string(row + 9, 1, "after a gap")
    book.close()
    return path


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"constant_memory": True},
        {"date_1904": True},
        {"constant_memory": True, "date_1904": True},
    ],
    ids=["shared-strings", "inline-strings", "1904", "inline-1904"],
)
def test_generated_workbooks_read_as_calamine_reads_them(
    tmp_path: Path, options: dict[str, bool], path_kind: str
) -> None:
    _assert_same(_generated(tmp_path / "g.xlsx", options))


_SHEET = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<x:worksheet xmlns:x="urn:test:spreadsheetml"
 xmlns:x14ac="urn:test:x14ac">
<x:dimension ref="A1:C2"/>
<x:sheetData>
 <x:row r="1" x14ac:dyDescent="0.25">
  <x:c r="A1" t="inlineStr"><x:is><x:r><x:rPr><x:b/></x:rPr><x:t>bold</x:t></x:r>
   <x:r><x:t xml:space="preserve"> run</x:t></x:r><x:rPh sb="0" eb="1"><x:t>ph</x:t></x:rPh>
  </x:is></x:c>
  <x:c t="str"><x:f>A1</x:f><x:v>a &amp; b &#233;</x:v></x:c>
  <x:c><x:v>42</x:v></x:c>
 </x:row>
 <x:row>
  <x:c t="d"><x:v>2024-03-01T10:20:30</x:v></x:c>
  <x:c t="d"><x:v>2024-03-02</x:v></x:c>
  <x:c t="inlineStr"><x:is><x:t><![CDATA[<cdata>]]></x:t></x:is></x:c>
 </x:row>
 <!-- a comment -->
 <x:row r="9"><x:c r="E9" t="e"><x:v>#N/A</x:v></x:c><x:c r="F9" t="b"><x:v>1</x:v></x:c></x:row>
</x:sheetData>
</x:worksheet>
"""

#: Only what the regex path reads (no reference, CDATA or comment), in unusual spellings:
#: prefixes, ``t`` before ``s``, single quotes, spaces around ``=``, an empty ``<v/>``.
_SHEET_REGEX = """<?xml version="1.0" encoding="UTF-8"?>
<x:worksheet xmlns:x="urn:test:spreadsheetml">
<x:sheetData><x:row r="2"><x:c r="B2" t='inlineStr' s = '0'><x:is><x:r><x:t>rich</x:t></x:r>
<x:r><x:t xml:space="preserve"> &lt;text&gt;</x:t></x:r></x:is></x:c>
<x:c r="C2" t="str"><x:v/></x:c>
<x:c r="D2"><x:v>0.1</x:v></x:c></x:row><x:row r="4"><x:c r="C4" t="b"><x:v>0</x:v></x:c></x:row>
</x:sheetData></x:worksheet>
"""


@pytest.mark.parametrize("xml", [_SHEET, _SHEET_REGEX], ids=["elementtree-only", "regex"])
def test_hand_written_sheet_xml(tmp_path: Path, path_kind: str, xml: str) -> None:
    """Prefixed tags, cells and rows without ``r``, rich and phonetic text, references,
    CDATA, comments, ``t="d"``, a row beyond the dimension: as calamine reads them."""
    src = io.BytesIO()
    book = xlsxwriter.Workbook(src, {"in_memory": True})
    book.add_worksheet("S").write_string(0, 0, "placeholder")
    book.close()
    path = tmp_path / "h.xlsx"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                data = xml.encode()
            zout.writestr(info.filename, data)
    _assert_same(path)
    rows = _stream_rows(path, "xl/worksheets/sheet1.xml")
    first = ("bold run", "a & b é", "42") if xml is _SHEET else ("rich <text>", "", "0.1")
    assert rows[0][:3] == first


def test_blocks_split_rows_only_at_row_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path_kind: str
) -> None:
    monkeypatch.setattr(xlsx_stream, "BLOCK_BYTES", 64)
    _assert_same(_generated(tmp_path / "g.xlsx", {"constant_memory": True}))


def test_date_format_codes() -> None:
    dates = ["yyyy-mm-dd", "d/m/yy", "hh:mm", "[h]:mm:ss", "[$-409]mmm d", "[Red]yyyy", "ss.0"]
    numbers = ["General", "0.00", '"day" 0', "\\d0", "0.00%", "#,##0;[Red]-#,##0", "0.0E+00"]
    assert all(is_date_format(code) for code in dates)
    assert not any(is_date_format(code) for code in numbers)
