"""tabular_worker: every CSV/TSV/XLSX of the corpus, streaming, determinism, typing, dates,
limits and options. ``handle()`` is driven as the consumer drives it, and every submission
goes through core's validator."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import blake3
import pytest
import tabular_worker
import xlsxwriter

from telha.domain.submission import decode_submission, to_projection
from tests.conftest import CORPUS
from workers_common import CorruptInput, Job, ResourceLimit, UnsupportedFeature, WorkerFailure


def _job(
    name: str,
    raw: bytes | None = None,
    options: dict[str, Any] | None = None,
    path: Path | None = None,
    fmt: str | None = None,
) -> Job:
    fmt = fmt or name.rsplit(".", 1)[-1]
    data = raw if raw is not None else path.read_bytes() if path is not None else b""
    digest = blake3.blake3(data).hexdigest()  # as core puts it in the payload
    return Job("id", f"ingest:{fmt}", fmt, name, raw, digest, options or {}, 0, "t", "o", path)


class Run:
    """All submissions of one job, as core would receive them."""

    def __init__(self, job: Job) -> None:
        self.subs: list[dict[str, Any]] = []
        self.ids: list[str] = []
        gen = tabular_worker.handle(job)
        base = 0
        sub = next(gen)
        while True:
            raw = json.dumps(sub, ensure_ascii=False).encode()
            to_projection(decode_submission(raw), base)
            base += len(sub["canonicalText"].encode())
            self.subs.append(sub)
            ids = [str(uuid.uuid4()) for _ in sub["nodes"]]
            self.ids += ids
            try:
                sub = gen.send(ids)
            except StopIteration:
                break
        assert [s["partial"] for s in self.subs] == [True] * (len(self.subs) - 1) + [False]

    def canonical(self) -> str:
        """The submissions as JSON with the fake ids core assigned replaced by their index."""
        text = json.dumps(self.subs, ensure_ascii=False)
        for i, node_id in enumerate(self.ids):
            text = text.replace(node_id, f"id-{i}")
        return text

    @property
    def text(self) -> str:
        return "".join(s["canonicalText"] for s in self.subs)

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self.subs[-1]["stats"])

    def nodes(self, label: str) -> list[dict[str, Any]]:
        return [n for s in self.subs for n in s["nodes"] if n["labels"] == [label]]

    def span_texts(self, label: str) -> list[str]:
        data = self.text.encode()
        out = []
        for sub in self.subs:
            for node in sub["nodes"]:
                if node["labels"] == [label]:
                    span = sub["spans"][node["spanRefs"][0]]
                    out.append(data[span["start"] : span["end"]].decode())
        return out

    def rows(self, label: str = "TABLE_ROW") -> list[dict[str, Any]]:
        return [n["properties"] for n in self.nodes(label)]


def run_file(rel: str, options: dict[str, Any] | None = None) -> Run:
    path = CORPUS / rel
    return Run(_job(path.name, options=options, path=path))


# Expected outcome per corpus file: (options, rows, columns of the first table, encoding,
# failure type). Notes: the Greek file (69 bytes) is guessed as cp1253, which reads its bytes
# as ISO-8859-7 does; foods1_latin1.csv is ASCII but for its delimiter, byte 0xA7 ("§" in
# Latin-1 and in the guessed cp1257), not "÷" (0xF7) — see test_non_ascii_delimiter.
CORPUS_CASES: dict[str, tuple[dict[str, Any], int, list[str], str | None, type | None]] = {
    "csv/bom.csv": ({}, 2, ["id", "name"], "utf-8-sig", None),
    "csv/countries.csv": (
        {},
        5,
        ["id", "neighbor_id", "name", "population", "col_5"],
        "utf-8",
        None,
    ),
    "csv/csv-pipe.csv": ({}, 5, ["Index", "Customer Id", "First Name"], "utf-8", None),
    "csv/csv-too-many-columns.csv": (
        {},
        5,
        ["col_1", "col_2", "col_3", "col_4", "col_5"],
        "utf-8",
        None,
    ),
    "csv/duplicate-column.csv": ({}, 1, ["A", "B", "B_2", "C"], "utf-8", None),
    "csv/escaped_quotes.csv": ({}, 2, ["a", "b"], "utf-8", None),
    "csv/foods1_latin1.csv": (
        {"delimiter": "§"},
        27,
        ["category", "calories", "fats_g", "sugars_g"],
        "cp1257",
        None,
    ),
    "csv/issue-1478_table.csv": ({}, 10, ["col_1", "col_2", "col_3", "col_4"], "utf-8", None),
    "csv/latin1.csv": ({}, 2, ["id", "name"], "cp1252", None),
    "csv/newlines_crlf.csv": ({}, 3, ["a", "b", "c"], "utf-8", None),
    "csv/quotes_and_newlines.csv": ({}, 2, ["a", "b"], "utf-8", None),
    "csv/table-infer-iso-8859-7.csv": (
        {},
        4,
        ["id", "age", "name"],
        "cp1253",
        None,
    ),
    "tsv/table.tsv": ({}, 3, ["id", "name"], "utf-8", None),
    "xlsx/example.xlsx": ({}, 26, ["hello"], None, None),
    "xlsx/mixed.xlsx": (
        {},
        5,
        ["Employee ID", "Employee Name", "Date", "Details", "Asset ID"],
        None,
        None,
    ),
    "xlsx/multiline-headers.xlsx": ({}, 3, ["Region", "Caloric contribution"], None, None),
    "xlsx/protectedFile.xlsx": ({}, 0, [], None, UnsupportedFeature),
    "xlsx/testEXCEL-formats.xlsx": ({}, 12, ["col_1", "col_2", "col_3", "col_4"], None, None),
    "xlsx/testEXCEL.strict.xlsx": ({}, 6, ["Test spreadsheet", "col_2"], None, None),
    "xlsx/xlsx_01.xlsx": ({}, 32, ["first", "second", "third"], None, None),
    "xlsx/xlsx_03_chartsheet.xlsx": (
        {},
        6,
        ["Year", "Freshwater Ducks", "Saltwater Ducks", "Ducks"],
        None,
        None,
    ),
}


def test_every_tabular_corpus_file_has_a_case() -> None:
    files = {
        str(p.relative_to(CORPUS))
        for folder in ("csv", "tsv", "xlsx")
        for p in (CORPUS / folder).iterdir()
    }
    assert files == set(CORPUS_CASES)


@pytest.mark.parametrize("rel", sorted(CORPUS_CASES))
def test_corpus_file(rel: str) -> None:
    options, rows, columns, encoding, failure = CORPUS_CASES[rel]
    if failure is not None:
        with pytest.raises(failure):
            run_file(rel, options)
        return
    run = run_file(rel, options)
    stats = run.stats
    assert stats["rows"] == rows == len(run.nodes("TABLE_ROW"))
    first = run.nodes("TABLE")[0]["properties"]
    assert first["columns"][: len(columns)] == columns
    assert stats["encoding"] == encoding
    # Each row's span text is its canonical text: the cells' text joined by TAB, nothing of
    # the newlines around it (a quoted cell's own line breaks stay inside).
    assert all(line == line.strip("\n") for line in run.span_texts("TABLE_ROW"))
    tables = run.nodes("TABLE")
    assert sum(t["properties"]["rows"] for t in tables) == rows


def test_protected_workbook_is_encrypted_unsupported() -> None:
    with pytest.raises(UnsupportedFeature, match=r"^encrypted:"):
        run_file("xlsx/protectedFile.xlsx")


def test_bom_latin1_greek_and_tsv_null_marker() -> None:
    assert run_file("csv/bom.csv").rows()[1] == {"id": 2, "name": "中国人", "row": 2}
    assert run_file("csv/latin1.csv").rows()[1]["name"] == "©"
    greek = run_file("csv/table-infer-iso-8859-7.csv", {"encoding": "iso-8859-7"})
    assert greek.rows()[0]["name"] == "Λεωνιδας"
    assert run_file("tsv/table.tsv").rows()[2] == {"id": 3, "name": None, "row": 3}


def test_csv_shapes_from_the_corpus() -> None:
    pipe = run_file("csv/csv-pipe.csv")
    assert pipe.stats["delimiter"] == "|"
    assert pipe.rows()[3]["Company"] == "Dominguez|Mcmillan and Donovan"
    countries = run_file("csv/countries.csv")
    assert countries.rows()[1] == {
        "id": 2,
        "neighbor_id": 3,
        "name": "France",
        "population": "n/a",
        "col_5": "find the population",
        "row": 2,
    }
    assert countries.rows()[4]["name"] is None
    assert countries.stats["dirty_counts"] == {"int": 2}  # "Ireland", "n/a"
    quotes = run_file("csv/quotes_and_newlines.csv")
    assert quotes.rows()[0]["b"] == 'ha \n"ha" \nha'
    # The quoted cell keeps its line breaks in the canonical text; the span is the whole row.
    assert quotes.span_texts("TABLE_ROW")[0] == '1\tha \n"ha" \nha'
    assert quotes.span_texts("TABLE_ROW")[1] == "3\t4"
    crlf = run_file("csv/newlines_crlf.csv")
    assert crlf.rows()[1]["a"] == "Once upon \na time"
    dates = run_file("csv/issue-1478_table.csv")
    assert dates.stats["header"] is False and dates.stats["delimiter"] == "|"
    assert dates.rows()[0]["col_2"] == "2015-06-01"  # 01.06.2015 is day-first
    assert dates.stats["ambiguous_dates"] == 0


def test_xlsx_projection() -> None:
    run = run_file("xlsx/xlsx_03_chartsheet.xlsx")
    (book,) = run.nodes("WORKBOOK")
    assert book["properties"] == {"name": "xlsx_03_chartsheet.xlsx", "sheets": 1}
    assert run.stats["skipped_sheets"] == 1
    assert run.rows()[0] == {
        "Year": 2019,
        "Freshwater Ducks": 120,
        "Saltwater Ducks": 80,
        "Ducks": 200,
        "row": 1,
    }
    example = run_file("xlsx/example.xlsx", {"sheets": ["test5", "temporal"]})
    names = [t["properties"]["name"] for t in example.nodes("TABLE")]
    assert names == ["test5", "temporal"]
    (workbook_id,) = [n["id"] for n in example.nodes("WORKBOOK")]
    rels = [r for s in example.subs for r in s["relationships"] if r["fromId"] == workbook_id]
    assert [r["properties"]["ord"] for r in rels] == [0, 1]
    assert example.rows()[0] == {
        "dtm": "1999-12-31T10:30:45",
        "dt": "2024-01-01",
        "val": 1.5,
        "row": 1,
    }
    assert "\n\n" in example.text  # a blank line between tables
    strict = run_file("xlsx/testEXCEL.strict.xlsx")
    assert [t["properties"]["rows"] for t in strict.nodes("TABLE")] == [2, 4, 0]


def _csv_bytes(rows: int) -> bytes:
    lines = ["id,name,when,score,flag"]
    for i in range(rows):
        lines.append(f'{i},"name {i}, ok",2026-01-{i % 28 + 1:02d},{i / 4},{i % 2 == 0}')
    return ("\r\n".join(lines) + "\r\n").encode()


def test_streaming_partials_concatenate_to_the_single_shot_text() -> None:
    raw = _csv_bytes(10)
    single = Run(_job("g.csv", raw))
    streamed = Run(_job("g.csv", raw, {"rows_per_partial": 3}))
    assert len(single.subs) == 1
    assert len(streamed.subs) == 4
    assert streamed.text == single.text
    assert streamed.span_texts("TABLE_ROW") == single.text.split("\n")[1:]
    assert streamed.rows() == single.rows()
    later = streamed.subs[1]["relationships"]
    (table,) = streamed.nodes("TABLE")
    assert later[0]["fromId"] == table["id"]  # the TABLE node's deterministic id
    assert [r["properties"]["ord"] for r in later] == [3, 4, 5]
    assert streamed.rows()[0] == {
        "id": 0,
        "name": "name 0, ok",
        "when": "2026-01-01",
        "score": 0.0,
        "flag": True,
        "row": 1,
    }


def test_deterministic_across_runs_and_job_names() -> None:
    raw = _csv_bytes(25)
    a = Run(_job("a.csv", raw, {"rows_per_partial": 7}))
    b = Run(_job("b.csv", raw, {"rows_per_partial": 7}))
    assert a.text == b.text and len(a.nodes("TABLE_ROW")) == len(b.nodes("TABLE_ROW")) == 25
    # Only the name differs, and the TABLE id derived from it (uuid5 of the name and position).
    table_a, table_b = a.nodes("TABLE")[0]["id"], b.nodes("TABLE")[0]["id"]
    assert table_a != table_b
    assert a.canonical().replace("a.csv", "b.csv").replace(table_a, table_b) == b.canonical()
    assert Run(_job("a.csv", raw, {"rows_per_partial": 7})).canonical() == a.canonical()
    changed = Run(_job("a.csv", raw + b"99,x,2026-01-01,1.0,true\n", {"rows_per_partial": 7}))
    # A changed file's table keeps its id: a new version of the same node
    # (docs/architecture.md, "Versions and node identity").
    assert changed.nodes("TABLE")[0]["id"] == table_a


@pytest.mark.parametrize("raw", [b"", b"  \r\n\t\n  ", b"\xef\xbb\xbf", b"# only a comment\n"])
def test_empty_and_whitespace_only_files(raw: bytes) -> None:
    run = Run(_job("e.csv", raw))
    (table,) = run.nodes("TABLE")
    assert table["properties"]["rows"] == 0 and run.stats["rows"] == 0
    assert run.nodes("TABLE_ROW") == []


def test_typed_cells_and_dirty_counts() -> None:
    raw = (
        "n,x,ok,d,dt,s\n"
        "1,1.5,true,2026-02-03,2026-02-03 10:00:00,a\tb\n"
        "2,2,FALSE,2026-02-30,2026-02-03T10:00,\n"
        "three,x,maybe,soon,never,c\n"
        "4,1e3,true,2026-12-31,2026-02-03T10:00:05Z,d\n"
    ).replace("a\tb", '"a\tb"')
    run = Run(_job("t.csv", raw.encode()))
    rows = run.rows()
    assert rows[0] == {
        "n": 1,
        "x": 1.5,
        "ok": True,
        "d": "2026-02-03",
        "dt": "2026-02-03T10:00:00",
        "s": "a\tb",
        "row": 1,
    }
    assert rows[1]["d"] == "2026-02-30"  # invalid date: kept as text, dirty
    assert rows[1]["s"] is None and rows[1]["ok"] is False and rows[1]["x"] == 2.0
    assert rows[2]["n"] == "three" and rows[3]["x"] == 1000.0
    assert run.stats["dirty_counts"] == {
        "bool": 1,
        "date": 2,
        "datetime": 1,
        "float": 1,
        "int": 1,
    }
    assert run.span_texts("TABLE_ROW")[0] == "1\t1.5\ttrue\t2026-02-03\t2026-02-03 10:00:00\ta b"


DATES = (
    "id,when,other\n"
    "1,02/03/2026,01/01/2026\n"
    "2,04/05/2026,05/04/2026\n"
    "3,13/02/2026,01/01/2026\n"
    "4,06/07/2026,01/01/2026\n"
)


def test_day_first_month_first_without_clarify_emits_nothing() -> None:
    run = Run(_job("d.csv", DATES.encode()))
    # The whole column's evidence (13/02 in row 3) decides every row, the earlier ones too.
    assert [r["when"] for r in run.rows()] == [
        "2026-03-02",
        "2026-05-04",
        "2026-02-13",
        "2026-07-06",
    ]
    assert [r["other"] for r in run.rows()][1] == "2026-05-04"  # no evidence: month-first
    assert all("ambiguities" not in s for s in run.subs)
    assert run.stats["ambiguous_dates"] == 1 and run.stats["ambiguities"] == 0


def test_day_first_month_first_with_clarify() -> None:
    run = Run(_job("d.csv", DATES.encode(), {"clarify": True}))
    (sub,) = run.subs
    ambs = sub["ambiguities"]
    # Only the column without evidence ("other") is ambiguous: row 2 (node 0 is the TABLE).
    assert [a["nodeRef"] for a in ambs] == [2]
    first = ambs[0]
    assert first["kind"] == "day_first_month_first"
    assert first["candidates"] == [
        {"label": "2026-05-04 (month-first)", "validFrom": 1_777_852_800_000_000, "spanRef": 2},
        {"label": "2026-04-05 (day-first)", "validFrom": 1_775_347_200_000_000, "spanRef": 2},
    ]
    assert first["detectorConfidence"] > first["appliedCandidateConfidence"]
    assert run.stats["ambiguities"] == 1 and run.stats["ambiguities_suppressed"] == 0
    to_projection(decode_submission(json.dumps(sub).encode()))


def test_date_evidence_rules() -> None:
    raw = "d\n03/03/2026\n12/25/2026\n01/02/2026\n1.2.2026\n"
    run = Run(_job("e.csv", raw.encode(), {"clarify": True}))
    # a == b is not ambiguous; 25 second: month-first evidence for the column (01/02 is
    # January 2nd); dotted: day-first.
    assert [r["d"] for r in run.rows()] == ["2026-03-03", "2026-12-25", "2026-01-02", "2026-02-01"]
    assert "ambiguities" not in run.subs[0]


def test_non_ascii_delimiter() -> None:
    raw = "a÷b\n1÷x÷y\n".encode("latin-1")
    run = Run(_job("f.csv", raw, {"delimiter": "÷", "encoding": "latin-1"}))
    assert run.rows() == [{"a": 1, "b": "x", "col_3": "y", "row": 1}]
    foods = run_file("csv/foods1_latin1.csv", {"delimiter": "§"})
    assert foods.rows()[0] == {
        "category": "vegetables",
        "calories": 45,
        "fats_g": 0.5,
        "sugars_g": 2,
        "row": 1,
    }
    quoted = Run(_job("q.csv", 'a÷b\n"1÷2"÷z\n'.encode(), {"delimiter": "÷"}))
    assert quoted.rows()[0]["a"] == "1÷2"


def _xlsx(rows: int) -> bytes:
    buf = io.BytesIO()
    book = xlsxwriter.Workbook(buf, {"in_memory": True})
    sheet = book.add_worksheet("Data")
    sheet.write_row(0, 0, ["k", "v"])
    for i in range(rows):
        sheet.write_row(i + 1, 0, [i, f"v{i}"])
    book.close()
    return buf.getvalue()


def test_zip_bomb_like_workbook_is_a_resource_limit() -> None:
    src = zipfile.ZipFile(io.BytesIO(_xlsx(3)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(b"<sheetData>", b"<!--" + b" " * 50_000_000 + b"--><sheetData>")
            dst.writestr(info.filename, data)
    with pytest.raises(ResourceLimit, match="expands"):
        Run(_job("bomb.xlsx", out.getvalue()))


def test_cell_count_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from tabular_worker import xlsx_source

    monkeypatch.setattr(xlsx_source, "MAX_CELLS", 10)
    with pytest.raises(ResourceLimit, match="cells"):
        Run(_job("big.xlsx", _xlsx(20)))


def test_xlsx_streams_and_corrupt_inputs() -> None:
    run = Run(_job("s.xlsx", _xlsx(7), {"rows_per_partial": 3}))
    assert len(run.subs) == 3 and run.stats["rows"] == 7
    with pytest.raises(CorruptInput):
        Run(_job("bad.xlsx", b"PK\x03\x04 truncated"))
    with pytest.raises(CorruptInput):
        Run(_job("bin.csv", b"a,b\n\x00\x01\xff\xfe,2\n"))
    with pytest.raises(CorruptInput):
        Run(_job("x.csv", b"a,b\n\xff,1\n", {"encoding": "utf-8"}))


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"colour": "red"}, "colour"),
        ({"delimiter": ",,"}, "delimiter"),
        ({"encoding": "no-such-codec"}, "encoding"),
        ({"header": "maybe"}, "header"),
        ({"rows_per_partial": 0}, "rows_per_partial"),
        ({"label": "Row"}, "label"),
        ({"sheets": "Nope"}, "sheets"),
        ({"clarify": "yes"}, "clarify"),
    ],
)
def test_invalid_options(options: dict[str, Any], name: str) -> None:
    fmt_name = "x.xlsx" if name == "sheets" else "x.csv"
    raw = _xlsx(1) if name == "sheets" else b"a\n1\n"
    with pytest.raises(UnsupportedFeature, match=rf"^{name}:"):
        Run(_job(fmt_name, raw, options))


def test_ragged_row_wider_than_the_sniffed_sample() -> None:
    lines = ["a,b"] + [f"{i},x" for i in range(200)] + ["1,2,3,4,5,6,7,8,9,10,11,12"]
    run = Run(_job("r.csv", "\n".join(lines).encode()))
    columns = run.nodes("TABLE")[0]["properties"]["columns"]
    assert columns == ["a", "b"] + [f"col_{i}" for i in range(3, 13)]
    assert run.rows()[-1]["col_12"] == 12 and run.rows()[0]["col_12"] is None


def test_header_option_and_label() -> None:
    raw = b"a,b\n1,2\n"
    forced = Run(_job("h.csv", raw, {"header": "false", "label": "LINE"}))
    assert forced.rows("LINE")[0] == {"col_1": "a", "col_2": "b", "row": 1}
    named = Run(_job("h.csv", b"row,row,\n1,2,3\n", {"header": True}))
    assert named.nodes("TABLE")[0]["properties"]["columns"] == ["row_2", "row_3", "col_3"]


def test_failures_are_typed() -> None:
    assert issubclass(UnsupportedFeature, WorkerFailure)
