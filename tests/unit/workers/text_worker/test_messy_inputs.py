"""Messy real-world kinds of input, each built here (docs/formats.md, "Messy input"): lone
CR records, NUL in cells, quotes in TSV, a date column proved day-first late, legacy 8-bit
e-mail headers, unknown charset labels, nested markdown, Rust inline modules, Python
decorators, deep nesting, DOCX outline levels and localized heading styles, a PDF
docling-parse cannot read, HTML levels and typed cells, and the empty-input rule."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import code_worker
import docling_worker
import docx
import email_worker
import pytest
import tabular_worker
import xlsxwriter
from docx.enum.style import WD_STYLE_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

import text_worker
from telha.domain.submission import decode_submission, to_projection
from tests.support.pdf import assemble_pdf
from workers_common import Job


def _job(fmt: str, name: str, raw: bytes, options: dict[str, Any] | None = None) -> Job:
    return Job("j", f"ingest:{fmt}", fmt, name, raw, None, options or {}, 0, "t", "o")


def _run(module: Any, job: Job) -> list[dict[str, Any]]:
    """Every submission of ``job``, each checked by core's validator (spans slice exactly)."""
    result = module.handle(job)
    if isinstance(result, bytes):
        result = json.loads(result)
    subs = [result] if isinstance(result, dict) else []
    if not subs:
        sub = next(result)
        while True:
            subs.append(sub)
            try:
                sub = result.send([str(uuid.uuid4()) for _ in sub["nodes"]])
            except StopIteration:
                break
    base = 0
    for sub in subs:
        to_projection(decode_submission(json.dumps(sub).encode()), base)
        base += len(sub["canonicalText"].encode())
    return subs


def _nodes(subs: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return [n["properties"] for s in subs for n in s["nodes"] if n["labels"] == [label]]


def _rows(fmt: str, name: str, raw: bytes, **options: Any) -> tuple[list[dict[str, Any]], Any]:
    subs = _run(tabular_worker, _job(fmt, name, raw, options))
    return _nodes(subs, "TABLE_ROW"), subs[-1]


# --- tables -------------------------------------------------------------------------------


def test_csv_records_ending_with_a_lone_cr() -> None:
    rows, last = _rows("csv", "mac.csv", b'name,qty\r"Widget, large",3\rGadget,4\r')
    assert rows == [
        {"name": "Widget, large", "qty": 3, "row": 1},
        {"name": "Gadget", "qty": 4, "row": 2},
    ]
    assert last["stats"]["line_ends"] == "cr"
    assert last["canonicalText"] == "name\tqty\nWidget, large\t3\nGadget\t4"


def test_nul_inside_fields_is_dropped_and_counted() -> None:
    rows, last = _rows("csv", "nul.csv", b"id,note\n1,ab\x00c\n2,\x00\x00ok\n")
    assert [r["note"] for r in rows] == ["abc", "ok"]
    assert "\x00" not in last["canonicalText"] and last["stats"]["nul_chars"] == 3


def test_tsv_quotes_are_data() -> None:
    raw = (
        b'id\theight\tnote\n1\t5\'9" tall\tok\n2\t6ft\t"Best" seller\n3\t7\t"unclosed\n4\t8\tlast\n'
    )
    rows, last = _rows("tsv", "people.tsv", raw)
    assert [r["note"] for r in rows] == ["ok", '"Best" seller', '"unclosed', "last"]
    assert rows[0]["height"] == "5'9\" tall" and len(rows) == 4
    assert last["stats"]["rows"] == 4


def test_one_date_convention_per_column_from_the_whole_column() -> None:
    raw = b"when,n\n01/02/2024,1\n03/04/2024,2\n13/02/2024,3\n"
    rows, last = _rows("csv", "dates.csv", raw, clarify=True)
    assert [r["when"] for r in rows] == ["2024-02-01", "2024-04-03", "2024-02-13"]
    assert "ambiguities" not in last and last["stats"]["ambiguous_dates"] == 0
    # Without any evidence the column is month-first and clarify reports each ambiguous row.
    rows, last = _rows("csv", "none.csv", b"when\n01/02/2024\n03/04/2024\n", clarify=True)
    assert [r["when"] for r in rows] == ["2024-01-02", "2024-03-04"]
    assert last["stats"]["ambiguities"] == 2


def test_ragged_rows_are_counted_with_their_row_numbers() -> None:
    rows, last = _rows("csv", "ragged.csv", b"a,b\n1,2\n3,4,extra\n5,6\n7,8,9,10\n")
    assert rows[1]["col_3"] == "extra" and rows[3]["col_4"] == 10
    assert last["stats"]["ragged_rows"] == 2 and last["stats"]["ragged_first_rows"] == [2, 4]


def test_a_cell_with_a_line_break_keeps_it_in_its_row() -> None:
    rows, last = _rows("csv", "multi.csv", b'a,b\n"line one\nline two",2\n')
    assert rows[0]["a"] == "line one\nline two"
    assert last["canonicalText"].split("\n", 1)[1] == "line one\nline two\t2"


def test_xlsx_text_stored_numbers_stay_text_beside_general_numbers() -> None:
    out = io.BytesIO()
    book = xlsxwriter.Workbook(out)
    sheet = book.add_worksheet("S")
    general = book.add_format({"num_format": "General"})
    quoted = book.add_format({"quote_prefix": True})  # typed in Excel as '45000
    text = book.add_format({"num_format": "@"})
    sheet.write_row(0, 0, ["amount", "id"])
    for r, (amount, ident, fmt) in enumerate(
        [(45000, "45000", quoted), (1200.5, "00123", text), (7, "45001", quoted)], start=1
    ):
        sheet.write_number(r, 0, amount, general)
        sheet.write_string(r, 1, ident, fmt)
    book.close()
    rows, last = _rows("xlsx", "ids.xlsx", out.getvalue())
    assert [(r["amount"], r["id"]) for r in rows] == [
        (45000.0, "45000"), (1200.5, "00123"), (7.0, "45001"),
    ]  # fmt: skip
    assert last["stats"]["tables"][0]["types"] == {"amount": "float", "id": "string"}


# --- e-mail -------------------------------------------------------------------------------


def test_raw_latin1_headers_decode_by_the_declared_charset() -> None:
    raw = (
        "From: Jos\xe9 M\xfcller <jose@example.com>\nTo: ana@example.com\n"
        "Subject: R\xe9sum\xe9 f\xfcr Fran\xe7ois\nDate: Mon, 2 Mar 2026 10:00:00 +0000\n"
        "MIME-Version: 1.0\nContent-Type: text/plain; charset=iso-8859-1\n\nCaf\xe9 cr\xe8me\n"
    ).encode("latin-1")
    (sub,) = _run(email_worker, _job("eml", "latin.eml", raw))
    (message,) = _nodes([sub], "MESSAGE")
    assert message["subject"] == "Résumé für François"
    assert "José Müller" in sub["canonicalText"] and "\ufffd" not in sub["canonicalText"]
    (warning,) = sub["stats"]["warnings"]  # workers_common.warnings: one item per kind
    assert warning["kind"] == "encoding_fallback" and warning["count"] >= 2
    assert "iso8859-1" in warning["detail"]


def test_raw_header_without_declared_charset_falls_back_to_cp1252() -> None:
    raw = b"From: a@example.com\nSubject: \x93quoted\x94 \x80 price\n\nbody\n"
    (sub,) = _run(email_worker, _job("eml", "cp.eml", raw))
    assert _nodes([sub], "MESSAGE")[0]["subject"] == "\u201cquoted\u201d \u20ac price"


@pytest.mark.parametrize(
    ("body", "text", "codec"),
    [(b"caf\xc3\xa9 ok", "café ok", "utf-8"), (b"caf\xe9 \x80 ok", "café € ok", "cp1252")],
)
def test_unknown_body_charset_label_is_decoded_not_failed(
    body: bytes, text: str, codec: str
) -> None:
    raw = b"From: a@example.com\nSubject: x\nContent-Type: text/plain; charset=uft-8\n\n" + body
    (sub,) = _run(email_worker, _job("eml", "label.eml", raw))
    assert sub["canonicalText"].endswith(text)
    assert sub["stats"]["warnings"] == [
        {
            "kind": "encoding_fallback",
            "count": 1,
            "detail": f"body charset 'uft-8': decoded as {codec}",
        }
    ]


def test_the_same_attachment_twice_is_one_attachment_node() -> None:
    # Found by the fuzzer (tests/fuzz/found/eml-*): the node id appeared twice.
    part = (
        b"--b\nContent-Type: application/x-thing\nContent-Disposition: attachment; "
        b'filename="%s"\nContent-Transfer-Encoding: base64\n\nAAEC\n'
    )
    raw = (
        b"From: a@example.com\nSubject: twice\nMIME-Version: 1.0\n"
        b'Content-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/plain\n\nhi\n'
        + part % b"one.bin"
        + part % b"two.bin"
        + b"--b--\n"
    )
    (sub,) = _run(email_worker, _job("eml", "twice.eml", raw))
    assert len(_nodes([sub], "ATTACHMENT")) == 1
    names = [r["properties"]["name"] for r in sub["relationships"] if r["type"] == "HAS_ATTACHMENT"]
    assert names == ["one.bin", "two.bin"]


# --- code ---------------------------------------------------------------------------------


def _defs(name: str, source: str) -> list[tuple[str, Any, Any]]:
    (sub,) = _run(code_worker, _job("code", name, source.encode()))
    return [
        (n["labels"][0], n["properties"]["qualified_name"], n["properties"].get("decorators"))
        for n in sub["nodes"][1:]
    ]


def test_rust_items_inside_an_inline_module() -> None:
    src = (
        "pub mod util {\n    pub fn helper() -> u32 { 1 }\n    mod inner { fn deep() {} }\n"
        "    pub struct Cfg;\n}\nfn main() { util::helper(); }\n"
    )
    names = [(label, qual) for label, qual, _ in _defs("lib.rs", src)]
    assert names == [
        ("MODULE", "util"), ("FUNCTION", "util.helper"), ("MODULE", "util.inner"),
        ("FUNCTION", "util.inner.deep"), ("STRUCT", "util.Cfg"), ("FUNCTION", "main"),
    ]  # fmt: skip


def test_python_decorators_are_recorded_as_written() -> None:
    src = (
        "import functools\n\n@functools.lru_cache(maxsize=None)\n@staticmethod\n"
        "def f(x):\n    return x\n\nclass C:\n    @property\n    def p(self):\n        return 1\n"
        "\n    def plain(self):\n        pass\n"
    )
    assert _defs("m.py", src) == [
        ("FUNCTION", "f", ["functools.lru_cache(maxsize=None)", "staticmethod"]),
        ("CLASS", "C", None),
        ("METHOD", "C.p", ["property"]),
        ("METHOD", "C.plain", None),
    ]


def test_deep_nesting_is_not_a_failure() -> None:
    src = "const x = " + "(" * 20000 + "1" + ")" * 20000 + ";\nfunction after() {}\n"
    assert _defs("deep.js", src)[-1][:2] == ("FUNCTION", "after")


# --- markdown -----------------------------------------------------------------------------


def test_markdown_sections_nest_by_level() -> None:
    raw = b"# A\n\npara\n\n## B\n\nunder b\n\n### C\n\n## D\n\n# E\n\nlast\n"
    (sub,) = _run(text_worker, _job("markdown", "n.md", raw))
    nodes = sub["nodes"]

    def name(i: int) -> str:
        p = nodes[i]["properties"]
        return str(p.get("title") or p.get("text") or p.get("name"))

    edges = [
        (name(r["fromRef"]), name(r["toRef"]), r["properties"]["ord"]) for r in sub["relationships"]
    ]
    assert edges == [
        ("n.md", "A", 0), ("A", "para", 0), ("A", "B", 1), ("B", "under b", 0), ("B", "C", 1),
        ("A", "D", 2), ("n.md", "E", 1), ("E", "last", 0),
    ]  # fmt: skip


# --- documents ----------------------------------------------------------------------------


def _docx_with_hidden_headings() -> bytes:
    d = docx.Document()
    german = d.styles.add_style("Überschrift 1", WD_STYLE_TYPE.PARAGRAPH)
    french = d.styles.add_style("Titre 2", WD_STYLE_TYPE.PARAGRAPH)
    d.add_paragraph("Kapitel Eins", style=german)
    d.add_paragraph("Body under the German heading.")
    p = d.add_paragraph("Outline on the paragraph")
    level = OxmlElement("w:outlineLvl")
    level.set(qn("w:val"), "0")
    p._p.get_or_add_pPr().append(level)
    d.add_paragraph("Body under the direct outline heading.")
    d.add_paragraph("Sous-titre", style=french)
    d.add_paragraph("French body.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def test_docx_outline_level_and_localized_heading_styles_are_sections() -> None:
    (sub,) = _run(docling_worker, _job("docx", "h.docx", _docx_with_hidden_headings()))
    sections = [(s["title"], s["level"]) for s in _nodes([sub], "SECTION")]
    assert sections == [("Kapitel Eins", 1), ("Outline on the paragraph", 1), ("Sous-titre", 2)]
    # Nesting: "Sous-titre" (2) sits inside "Outline on the paragraph" (1).
    by_title = {n["properties"].get("title"): i for i, n in enumerate(sub["nodes"])}
    parents = {r["toRef"]: r["fromRef"] for r in sub["relationships"]}
    assert parents[by_title["Sous-titre"]] == by_title["Outline on the paragraph"]


def _self_drawing_form_pdf() -> bytes:
    """A page whose resources hold a Form XObject that draws itself through the same
    resources: docling-parse recurses until it dies; pdfium bounds the recursion."""
    page = b"BT /F1 12 Tf 72 720 Td (Hello form recursion) Tj ET /X1 Do"
    form = b"BT /F1 10 Tf 72 700 Td (inside form) Tj ET /X1 Do"
    return assemble_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources 6 0 R"
        b" /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(page) + page + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Font << /F1 5 0 R >> /XObject << /X1 7 0 R >> >>",
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources 6 0 R /Length %d >>"
        b"\nstream\n" % len(form) + form + b"\nendstream",
    ])  # fmt: skip


def test_pdf_docling_parse_cannot_read_falls_back_to_pypdfium2() -> None:
    (sub,) = _run(docling_worker, _job("pdf", "loop.pdf", _self_drawing_form_pdf()))
    assert sub["stats"]["pdf_extractor"] == "pypdfium2"
    assert sub["stats"]["pdf_layout"] == "none"  # pdfium's text: no line geometry to lay out
    assert sub["canonicalText"].startswith("Hello form recursion")
    assert _nodes([sub], "PARAGRAPH")[0]["page"] == 1


def test_html_levels_typed_cells_and_plain_paragraphs() -> None:
    html = (
        b"<html><body><h1>Top</h1><p>intro</p><h2>Sub</h2><p>x</p><table>"
        b"<tr><th>n</th><th>when</th><th>ok</th><th>note</th></tr>"
        b"<tr><td>1</td><td>2026-01-02</td><td>true</td><td>a\x00</td></tr>"
        b"<tr><td>22</td><td>13/02/2026</td><td>false</td><td></td></tr>"
        b"</table></body></html>"
    )
    (sub,) = _run(docling_worker, _job("html", "t.html", html))
    assert [(s["title"], s["level"]) for s in _nodes([sub], "SECTION")] == [("Top", 1), ("Sub", 2)]
    assert _nodes([sub], "PARAGRAPH")[0] == {"text": "intro"}  # no "label": "text"
    assert _nodes([sub], "TABLE_ROW") == [
        {"n": 1, "when": "2026-01-02", "ok": True, "note": "a", "row": 1},
        {"n": 22, "when": "2026-02-13", "ok": False, "note": None, "row": 2},
    ]
    # The HTML5 parser drops U+0000 from body text as a browser does (docling_worker.html5):
    # it never reaches the projection, so there is nothing left to count.
    assert "nul_chars" not in sub["stats"] and "\x00" not in sub["canonicalText"]


# --- the empty-input rule -----------------------------------------------------------------

EMPTY = [
    (text_worker, "text", "e.txt", "DOCUMENT"),
    (text_worker, "markdown", "e.md", "DOCUMENT"),
    (tabular_worker, "csv", "e.csv", "TABLE"),
    (tabular_worker, "tsv", "e.tsv", "TABLE"),
    (tabular_worker, "xlsx", "e.xlsx", "WORKBOOK"),
    (email_worker, "eml", "e.eml", "MESSAGE"),
    (email_worker, "msg", "e.msg", "MESSAGE"),
    (code_worker, "code", "e.py", "FILE"),
    (docling_worker, "docx", "e.docx", "DOCUMENT"),
    (docling_worker, "pdf", "e.pdf", "DOCUMENT"),
    (docling_worker, "pptx", "e.pptx", "DOCUMENT"),
    (docling_worker, "html", "e.html", "DOCUMENT"),
]


@pytest.mark.parametrize(
    "raw", [b"", b" \r\n\t\n", b"\xef\xbb\xbf\n"], ids=["zero", "blank", "bom"]
)
@pytest.mark.parametrize(("module", "fmt", "name", "root"), EMPTY, ids=[e[1] for e in EMPTY])
def test_empty_input_completes_empty_in_every_format(
    module: Any, fmt: str, name: str, root: str, raw: bytes
) -> None:
    subs = _run(module, _job(fmt, name, raw))
    assert "".join(s["canonicalText"] for s in subs) == ""
    assert [n["labels"][0] for s in subs for n in s["nodes"]] == [root]
    assert subs[-1]["stats"]["empty"] is True
