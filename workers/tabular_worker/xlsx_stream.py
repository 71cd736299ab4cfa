"""Streaming XLSX worksheet reader: one worksheet's XML part, read from the ZIP in blocks of
rows, rendered as calamine (fastexcel, ``dtypes="string"``) renders cells as text.

**What is read.** ``xl/workbook.xml`` (``workbookPr date1904``), ``xl/styles.xml`` (``cellXfs``
number formats, custom ``numFmts``), ``xl/sharedStrings.xml`` (kept in memory as one string
column) and the worksheet part itself, decompressed with :mod:`zipfile` in chunks of
:data:`BLOCK_BYTES` cut after a ``</row>``. Only ``<c>`` elements are read: their ``r``
(reference), ``t`` (type), ``s`` (style), ``<v>`` (value, a formula's cached value) and ``<is>``
(inline string). Transitional and strict OOXML, prefixed or not, are read alike (tags are
matched by local name). A block is parsed with regular expressions over the text and rendered
with polars expressions (no Python work per cell); a block that holds something the fast path
does not handle — a cell without ``r``, a numeric character reference, CDATA, a comment or a
processing instruction — is parsed with :mod:`xml.etree.ElementTree` instead (same rendering).

**Rendering** (as calamine): shared (``t="s"``) and inline (``t="inlineStr"``) strings are the
concatenated ``<t>`` texts (rich-text runs included, phonetic ``<rPh>`` runs excluded) with
``_xHHHH_`` escapes decoded; ``t="str"`` (formula string) is the ``<v>`` text; ``t="b"`` is
``true``/``false``; ``t="e"`` (an error) is null but still occupies its cell; ``t="d"`` (ISO
date) is its text as written; numbers are rounded to 9 decimals without an exponent, trailing
zeros and point dropped (whole numbers show all their digits, ``1/3`` is ``0.333333333``, a tiny
negative is ``-0``: fastexcel's ``{:.9}``); a number whose style has a
date format (built-in ``numFmtId`` 14–22 and 45–47, or a custom code with ``d m y h s`` outside
quotes, brackets and escapes) is a date-time ``YYYY-MM-DD HH:MM:SS`` (``.mmm`` added when the
milliseconds are not zero; serials before 60 are shifted a day for Excel's 1900 leap-year bug;
the 1904 system starts on 1904-01-01). Midnight date-times are shortened to the date later by
:mod:`tabular_worker.xlsx_source`, for every cell, as before.

**Shape.** Rows are the sheet rows that hold at least one value, in row order; a cell without
a value (only a style) is absent. Columns are absolute: ``c0`` is column ``A``, and a batch is
as wide as its rightmost value. :class:`SheetStream` records the used range (first/last row and
column with a value) after a pass, which :mod:`tabular_worker.xlsx_source` uses to cut the
columns like calamine's range does (leading empty columns dropped).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import polars as pl

from workers_common.cell_types import PATTERNS

__all__ = [
    "BLOCK_BYTES",
    "SheetStream",
    "WorkbookInfo",
    "is_date_format",
    "read_workbook_info",
]

#: Uncompressed XML bytes read per block (cut after the last ``</row>``).
BLOCK_BYTES = 4 << 20

#: Built-in number formats that are dates, times or durations.
_BUILTIN_DATES = frozenset([*range(14, 23), 45, 46, 47])
_P = r"(?:[A-Za-z_][A-Za-z0-9_.-]*:)?"  # an optional namespace prefix
_WS = r"[ \t\r\n]"
_CELL = rf"<{_P}c(?:{_WS}[^>]*?)?(?:/>|>(?s:.*?)</{_P}c>)"
_START = r"^<[^>]*?"
_REF = _START + rf"""{_WS}r{_WS}*={_WS}*["']\$?([A-Za-z]{{1,3}})\$?([0-9]+)["']"""
_TYPE = _START + rf"""{_WS}t{_WS}*={_WS}*["']([A-Za-z]*)["']"""
_STYLE = _START + rf"""{_WS}s{_WS}*={_WS}*["']([0-9]+)["']"""
_VALUE = rf"<{_P}v(?:{_WS}[^>]*)?>([^<]*)</{_P}v>"
_VALUE_EMPTY = rf"<{_P}v(?:{_WS}[^>]*)?/>"
_INLINE = rf"(?s)<{_P}is(?:{_WS}[^>]*)?>(.*?)</{_P}is>"
_INLINE_PLAIN = (
    rf"<{_P}is(?:{_WS}[^>]*)?>{_WS}*<{_P}t(?:{_WS}[^>]*)?>([^<]*)</{_P}t>{_WS}*</{_P}is>"
)
#: The usual shape of a cell (Excel, LibreOffice, openpyxl, xlsxwriter write ``r s t``), a
#: one-pass regex: a block whose cells all match it skips the per-attribute expressions.
_COMMON = (
    r'^<c r="([A-Z]{1,3})([0-9]+)"(?: s="([0-9]+)")?(?: t="([a-zA-Z]+)")?'
    r"(?:/>|>(?:<f(?: [^>/]*)?(?:/>|>[^<]*</f>))?(?:<v>([^<]*)</v>)?"
    r'(?:<is><t(?: xml:space="preserve")?>([^<]*)</t></is>)?</c>)$'
)
_PHONETIC = rf"(?s)<{_P}rPh\b.*?</{_P}rPh>"
_T_RUN = rf"<{_P}t(?:\s[^>]*)?>[^<]*</{_P}t>"
_ESCAPE_X = re.compile(r"_x([0-9A-Fa-f]{4})_")
#: What only :func:`_slow_cells` reads: character references, CDATA, comments, PIs.
_SLOW = r"&#|<!|<\?"
_ROW_END = re.compile(rb"</(?:[A-Za-z_][\w.-]*:)?row\s*>")
_SHEET_DATA = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?sheetData(?:\s[^>]*)?(/?)>")
_SHEET_DATA_END = re.compile(rb"</(?:[A-Za-z_][\w.-]*:)?sheetData\s*>")
_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'"), ("&amp;", "&"))
_MS_PER_DAY = 86_400_000
_EPOCH_1900 = -25_569 * _MS_PER_DAY  # 1899-12-30 in ms since 1970-01-01
_EPOCH_1904 = -24_107 * _MS_PER_DAY  # 1904-01-01
_LONG = {
    "row": pl.Int64,
    "col": pl.Int64,
    "t": pl.String,
    "s": pl.Int64,
    "v": pl.String,
    "inline": pl.String,
}


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _unescape_x(text: str) -> str:
    """Decode OOXML ``_xHHHH_`` escapes (how control characters are written)."""
    if "_x" not in text:
        return text
    return _ESCAPE_X.sub(lambda m: chr(int(m.group(1), 16)), text)


def is_date_format(code: str) -> bool:
    """Whether a number format code shows a date, time or duration: ``d m y h s`` (any case)
    outside quoted text, ``\\``/``_``/``*`` escapes and ``[...]`` sections (``[h]``, ``[mm]``,
    ``[ss]`` durations count)."""
    i, n = 0, len(code)
    while i < n:
        ch = code[i]
        if ch == '"':
            end = code.find('"', i + 1)
            i = n if end < 0 else end + 1
            continue
        if ch in "\\_*":
            i += 2
            continue
        if ch == "[":
            end = code.find("]", i + 1)
            inner = code[i + 1 : n if end < 0 else end].lower()
            if inner and set(inner) <= {"h", "m", "s"}:
                return True
            i = n if end < 0 else end + 1
            continue
        if ch.lower() in "dmyhs":
            return True
        i += 1
    return False


@dataclass(frozen=True, slots=True)
class WorkbookInfo:
    """What every worksheet of a workbook shares.

    :ivar date1904: the workbook uses the 1904 date system.
    :ivar date_styles: ``cellXfs`` indexes whose number format is a date (:func:`is_date_format`).
    :ivar shared: the shared strings table, in order.
    """

    date1904: bool
    date_styles: frozenset[int]
    shared: pl.Series = field(repr=False)


def _parse(zf: zipfile.ZipFile, part: str) -> ET.Element | None:
    try:
        return ET.fromstring(zf.read(part))
    except KeyError:
        return None


def _date_styles(root: ET.Element | None) -> frozenset[int]:
    if root is None:
        return frozenset()
    custom: dict[int, str] = {}
    xfs: list[int] = []
    for el in root:
        name = _local(el.tag)
        if name == "numFmts":
            for fmt in el:
                fid = fmt.get("numFmtId")
                if fid is not None and fid.isdigit():
                    custom[int(fid)] = fmt.get("formatCode") or ""
        elif name == "cellXfs":
            for xf in el:
                fid = xf.get("numFmtId") or "0"
                xfs.append(int(fid) if fid.isdigit() else 0)
    out = set()
    for i, number_format in enumerate(xfs):
        if number_format in custom:
            if is_date_format(custom[number_format]):
                out.add(i)
        elif number_format in _BUILTIN_DATES:
            out.add(i)
    return frozenset(out)


def _string_item(si: ET.Element) -> str:
    """Text of an ``<si>``/``<is>``: its ``<t>`` texts, phonetic runs (``<rPh>``) excluded."""
    parts: list[str] = []

    def walk(el: ET.Element) -> None:
        for child in el:
            name = _local(child.tag)
            if name == "t":
                parts.append(child.text or "")
            elif name == "r":
                walk(child)

    walk(si)
    return _unescape_x("".join(parts))


def _shared_strings(zf: zipfile.ZipFile, part: str) -> pl.Series:
    values: list[str] = []
    try:
        f = zf.open(part)
    except KeyError:
        return pl.Series("shared", values, dtype=pl.String)
    with f:
        for _, el in ET.iterparse(f, events=("end",)):
            if _local(el.tag) == "si":
                values.append(_string_item(el))
                el.clear()
    return pl.Series("shared", values, dtype=pl.String)


def _workbook_part(zf: zipfile.ZipFile, kind: str, default: str) -> str:
    """Target of the workbook relationship whose type ends with ``/kind``."""
    rels = _parse(zf, "xl/_rels/workbook.xml.rels")
    if rels is not None:
        for r in rels.iter():
            if _local(r.tag) == "Relationship" and (r.get("Type") or "").endswith(f"/{kind}"):
                target = r.get("Target") or ""
                return target.lstrip("/") if target.startswith("/") else f"xl/{target}"
    return default


def read_workbook_info(zf: zipfile.ZipFile) -> WorkbookInfo:
    """Date system, date styles and shared strings of the workbook open as ``zf``.

    :raises ET.ParseError: a malformed part.
    """
    book = _parse(zf, "xl/workbook.xml")
    date1904 = False
    if book is not None:
        for el in book:
            if _local(el.tag) == "workbookPr":
                flag = (el.get("date1904") or "").lower()
                date1904 = flag in ("1", "true")
    styles = _parse(zf, _workbook_part(zf, "styles", "xl/styles.xml"))
    shared = _shared_strings(zf, _workbook_part(zf, "sharedStrings", "xl/sharedStrings.xml"))
    return WorkbookInfo(date1904, _date_styles(styles), shared)


def _col_index(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n - 1


def _decode_entities(e: pl.Expr) -> pl.Expr:
    for entity, char in _ENTITIES:
        e = e.str.replace_all(entity, char, literal=True)
    return e


def _fast_cells(block: bytes) -> pl.DataFrame | None:
    """Long cells (:data:`_LONG`) of a block by regular expressions; ``None`` when a cell has
    no ``r`` or the block holds a :data:`_SLOW` construct (it needs :func:`_slow_cells`)."""
    text = pl.Series("x", [block.decode("utf-8")], dtype=pl.String)
    if text.str.contains(_SLOW).any():
        return None
    cells = text.str.extract_all(_CELL).explode().drop_nulls()
    frame = pl.DataFrame({"x": cells})
    common = frame.select(pl.col("x").str.extract_groups(_COMMON)).unnest("x")
    if common.height and not common["1"].null_count():
        frame = common.select(
            letters=pl.col("1"),
            row=pl.col("2").cast(pl.Int64) - 1,
            t=pl.col("4"),
            s=pl.col("3").cast(pl.Int64),
            v=pl.col("5"),
            inline=pl.col("6"),
        )
        return _finish(frame, block)
    ref = pl.col("x").str.extract_groups(_REF)
    value = pl.col("x").str.extract(_VALUE, 1)
    if b"<v/>" in block or b":v/>" in block or b"<v " in block:
        value = pl.when(pl.col("x").str.contains(_VALUE_EMPTY)).then(pl.lit("")).otherwise(value)
    frame = frame.select(
        "x",
        letters=ref.struct.field("1"),
        row=ref.struct.field("2").cast(pl.Int64) - 1,
        t=pl.col("x").str.extract(_TYPE, 1),
        s=pl.col("x").str.extract(_STYLE, 1).cast(pl.Int64),
        v=value,
        inline=pl.col("x").str.extract(_INLINE_PLAIN, 1),
    )
    if frame["letters"].null_count():
        return None
    if (frame["inline"].is_null() & (frame["t"] == "inlineStr")).any():
        frame = frame.with_columns(
            inline=pl.col("x")
            .str.extract(_INLINE, 1)
            .str.replace_all(_PHONETIC, "")
            .str.extract_all(_T_RUN)
            .list.join("")
            .str.replace_all(r"<[^>]*>", "")
        )
    return _finish(frame, block)


def _finish(frame: pl.DataFrame, block: bytes) -> pl.DataFrame:
    """Entities and ``_xHHHH_`` escapes decoded, column letters as indexes."""
    if b"&" in block:
        frame = frame.with_columns(
            _decode_entities(pl.col("v")), _decode_entities(pl.col("inline"))
        )
    letters = frame["letters"].unique().to_list()
    mapping = pl.DataFrame(
        {"letters": letters, "col": [_col_index(x) for x in letters]},
        schema={"letters": pl.String, "col": pl.Int64},
    )
    frame = frame.join(mapping, on="letters", how="left", maintain_order="left")
    if b"_x" in block and frame["inline"].str.contains("_x", literal=True).any():
        frame = frame.with_columns(
            pl.col("inline").map_elements(_unescape_x, return_dtype=pl.String)
        )
    return frame.select(*_LONG)


def _slow_cells(block: bytes, last_row: int) -> tuple[pl.DataFrame, int]:
    """Long cells of a block with ElementTree (cells or rows without ``r``, references,
    CDATA, comments); returns them and the last row index seen."""
    root = ET.fromstring(_wrap(block))
    out: dict[str, list[object]] = {k: [] for k in _LONG}
    row = last_row
    for row_el in root:
        if _local(row_el.tag) != "row":
            continue
        r = row_el.get("r")
        row = int(r) - 1 if r and r.isdigit() else row + 1
        col = -1
        for c in row_el:
            if _local(c.tag) != "c":
                continue
            ref = c.get("r")
            m = re.fullmatch(r"\$?([A-Za-z]{1,3})\$?(\d+)", ref or "")
            if m:
                col, crow = _col_index(m.group(1)), int(m.group(2)) - 1
            else:
                col, crow = col + 1, row
            v = inline = None
            for child in c:
                name = _local(child.tag)
                if name == "v":
                    v = child.text or ""
                elif name == "is":
                    inline = _string_item(child)
            style = c.get("s")
            out["row"].append(crow)
            out["col"].append(col)
            out["t"].append(c.get("t"))
            out["s"].append(int(style) if style and style.isdigit() else None)
            out["v"].append(v)
            out["inline"].append(inline)
    return pl.DataFrame(out, schema=_LONG), row


_PREFIX = re.compile(rb"[<\s/]([A-Za-z_][\w.-]*):[A-Za-z_]")


def _wrap(block: bytes) -> bytes:
    """A cut-out block as a parseable document: its namespace prefixes get (dummy)
    declarations on a wrapping root (tags are matched by local name)."""
    prefixes = {p for p in _PREFIX.findall(block) if p not in (b"xml", b"xmlns")}
    decl = b"".join(b' xmlns:%s="urn:p:%s"' % (p, p) for p in sorted(prefixes))
    return b"<sheetData" + decl + b">" + block + b"</sheetData>"


def _number_text(x: float) -> str:
    """A float as calamine shows it: rounded to 9 decimals (exactly, from the binary value),
    trailing zeros and point dropped (``1.5e300`` gives all its digits, ``1/3`` ``0.333333333``,
    ``-0.0`` ``-0``)."""
    return f"{x:.9f}".rstrip("0").rstrip(".")


def _render(cells: pl.DataFrame, info: WorkbookInfo) -> pl.DataFrame:
    """``row``, ``col``, ``value`` (calamine's text, null for errors) of the cells that hold a
    value."""
    t = pl.col("t").fill_null("n")
    v = pl.col("v")
    x = v.cast(pl.Float64, strict=False)
    whole = (x == x.floor()) & (x.abs() < 2.0**53)
    neg_zero = (x == 0) & (pl.lit(1.0) / x < 0)
    # Vectorized where :func:`_number_text` is known to agree: whole numbers below 2**53, and
    # shortest round-trip texts of at most 9 decimals below 2**22 (there an ulp is under
    # 1e-9, so rounding the exact value to 9 decimals gives the same digits); the rest
    # (marked null here) goes through :func:`_number_text`.
    number = (
        pl.when(x.is_null())
        .then(v)
        .when(whole & neg_zero)
        .then(pl.lit("-0"))
        .when(whole)
        .then(x.cast(pl.Int64).cast(pl.String))
        .when(x.abs() < 2.0**22)
        .then(x.cast(pl.String))
    )
    epoch = _EPOCH_1904 if info.date1904 else _EPOCH_1900
    days = x if info.date1904 else pl.when(x >= 60).then(x).otherwise(x + 1)
    ms = (days * _MS_PER_DAY).round().cast(pl.Int64) + epoch
    stamp = ms.cast(pl.Datetime("ms"))
    date = (
        pl.when(x.is_null())
        .then(v)
        .otherwise(
            stamp.dt.strftime("%Y-%m-%d %H:%M:%S")
            + pl.when(ms.mod(1000) != 0)
            .then(pl.lit(".") + ms.mod(1000).cast(pl.String).str.zfill(3))
            .otherwise(pl.lit(""))
        )
    )
    styles = list(info.date_styles)
    value = (
        pl.when(t == "n")
        .then(pl.when(pl.col("s").is_in(styles)).then(date).otherwise(number))
        .when(t == "inlineStr")
        .then(pl.col("inline"))
        .when(t == "str")
        .then(v)
        .when(t == "b")
        .then(pl.when(v == "0").then(pl.lit("false")).when(v.is_not_null()).then(pl.lit("true")))
        .when((t == "s") | (t == "e"))
        .then(pl.lit(None, pl.String))
        .otherwise(v)
    )
    present = (
        pl.when(t == "inlineStr").then(pl.col("inline").is_not_null()).otherwise(v.is_not_null())
    )
    out = cells.with_columns(value=value, present=present).filter(pl.col("present"))
    if out.height:
        shared_idx = pl.when(pl.col("t") == "s").then(pl.col("v").cast(pl.Int64, strict=False))
        idx = out.select(shared_idx).to_series()
        if idx.is_not_null().any():
            ok = idx.is_between(0, info.shared.len() - 1)
            looked = info.shared.gather(idx.fill_null(0).clip(0, max(info.shared.len() - 1, 0)))
            if info.shared.len() == 0:
                looked = pl.Series("shared", [None] * out.height, dtype=pl.String)
            shared = pl.select(pl.when(ok).then(looked)).to_series()
            out = out.with_columns(
                value=pl.when(pl.col("t") == "s").then(shared).otherwise(pl.col("value"))
            )
        odd = (pl.col("t").fill_null("n") == "n") & ~pl.col("s").is_in(styles).fill_null(False)
        odd = odd & pl.col("v").cast(pl.Float64, strict=False).is_not_null()
        odd = odd & (
            pl.col("value").is_null() | pl.col("value").str.contains(r"[eEnN]|\.[0-9]{10}")
        )
        mask = out.select(odd.fill_null(False)).to_series()
        if mask.any():
            values = out["value"].to_list()
            for i in mask.arg_true().to_list():
                values[i] = _number_text(float(out["v"][i]))
            out = out.with_columns(value=pl.Series(values, dtype=pl.String))
    return out.select("row", "col", "value", text=pl.col("t").is_in(["s", "inlineStr", "str"]))


def _wide(cells: pl.DataFrame) -> pl.DataFrame:
    """Long ``row, col, value`` cells as one frame row per sheet row (sorted), ``c0`` = ``A``."""
    if cells.height == 0:
        return pl.DataFrame()
    width = int(cells["col"].max()) + 1  # type: ignore[arg-type]
    wide = cells.pivot(
        on="col", index="row", values="value", aggregate_function="last", sort_columns=True
    ).sort("row", maintain_order=True)
    have = set(wide.columns)
    return wide.select(
        [
            pl.col(str(j)).cast(pl.String).alias(f"c{j}")
            if str(j) in have
            else pl.lit(None, pl.String).alias(f"c{j}")
            for j in range(width)
        ]
    )


def _last_row_end(buf: bytes) -> int:
    """Offset just after the last ``</row>`` (any prefix) in ``buf``, 0 when there is none."""
    hi = len(buf)
    while (i := buf.rfind(b"row", 0, hi)) >= 0:
        j = buf.rfind(b"</", max(0, i - 64), i + 1)
        m = _ROW_END.match(buf, j) if j >= 0 else None
        if m is not None and m.end() >= i + 3:
            return m.end()
        hi = i
    return 0


@dataclass(slots=True)
class SheetStream:
    """One worksheet of an open workbook, read as string frames (module docstring); may be
    iterated any number of times.

    :ivar zf: the open workbook package.
    :ivar part: the worksheet's ZIP part name.
    :ivar info: :func:`read_workbook_info` of the workbook.
    :ivar first_row, last_row, first_col, last_col: the used range (0-based, inclusive) after a
        complete pass; ``last_row`` is -1 when no cell holds a value.
    :ivar cells: cells holding a value seen in the last pass.
    """

    zf: zipfile.ZipFile
    part: str
    info: WorkbookInfo
    first_row: int = -1
    last_row: int = -1
    first_col: int = -1
    last_col: int = -1
    cells: int = 0
    #: ``"<sheet column>:<type>"`` → cells stored as text (shared, inline or formula strings)
    #: whose text looks typed: ``'45000``, ``00123`` in a Text-formatted cell.
    text_typed: dict[str, int] = field(default_factory=dict)

    def _blocks(self) -> Iterator[bytes]:
        """The ``<sheetData>`` content, in blocks of whole rows (about :data:`BLOCK_BYTES`)."""
        with self.zf.open(self.part) as f:
            buf = b""
            started = False
            while True:
                chunk = f.read(BLOCK_BYTES)
                buf += chunk
                if not started:
                    m = _SHEET_DATA.search(buf)
                    if m is None:
                        if not chunk:
                            return
                        continue
                    if m.group(1):  # <sheetData/>
                        return
                    buf, started = buf[m.end() :], True
                end_tag = _SHEET_DATA_END.search(buf) if b"sheetData" in buf else None
                if end_tag is not None:
                    if buf[: end_tag.start()].strip():
                        yield buf[: end_tag.start()]
                    return
                cut = _last_row_end(buf)
                if cut > 0:
                    yield buf[:cut]
                    buf = buf[cut:]
                if not chunk:
                    if buf.strip():
                        yield buf
                    return

    def batches(self, batch_rows: int) -> Iterator[pl.DataFrame]:
        """String frames of at most ``batch_rows`` sheet rows (rows holding a value, in order;
        columns ``c0`` = ``A`` … up to the batch's rightmost value). Updates the used range."""
        self.first_row = self.last_row = self.first_col = self.last_col = -1
        self.cells = 0
        self.text_typed = {}
        last_row = -1
        for block in self._blocks():
            cells = _fast_cells(block)
            if cells is None:
                cells, last_row = _slow_cells(block, last_row)
            elif cells.height:
                last_row = int(cells["row"].max())  # type: ignore[arg-type]
            values = _render(cells, self.info)
            if values.height == 0:
                continue
            self._extend(values)
            self._count_text(values)
            frame = _wide(values.drop("text"))
            for start in range(0, frame.height, batch_rows):
                yield frame.slice(start, batch_rows)

    def _count_text(self, values: pl.DataFrame) -> None:
        """Per ``"<sheet column>:<type>"``, cells stored as text that look typed (they vote
        ``string`` in :func:`tabular_worker.table.build_table`)."""
        v = pl.col("value").str.strip_chars()
        text = values.filter(pl.col("text") & (v.str.len_bytes() > 0))
        if text.height:
            found = text.group_by("col").agg(
                v.str.contains(p).sum().alias(t) for t, p in PATTERNS.items()
            )
            for row in found.iter_rows(named=True):
                for t in PATTERNS:
                    if row[t]:
                        key = f"{row['col']}:{t}"
                        self.text_typed[key] = self.text_typed.get(key, 0) + int(row[t])

    def _extend(self, values: pl.DataFrame) -> None:
        rows, cols = values["row"], values["col"]
        lo_r, hi_r = int(rows.min()), int(rows.max())  # type: ignore[arg-type]
        lo_c, hi_c = int(cols.min()), int(cols.max())  # type: ignore[arg-type]
        self.first_row = lo_r if self.first_row < 0 else min(self.first_row, lo_r)
        self.last_row = max(self.last_row, hi_r)
        self.first_col = lo_c if self.first_col < 0 else min(self.first_col, lo_c)
        self.last_col = max(self.last_col, hi_c)
        self.cells += values.height
