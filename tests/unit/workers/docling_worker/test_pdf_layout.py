"""The model-free PDF layout pass (docling_worker.pdf_fonts, pdf_lines, pdf_blocks) on a PDF
of known structure written by the test (two columns, headings at three sizes, a bulleted list
in the Symbol font, running headers and footers, a hyphenated line end, a paragraph running
from one column into the next) and on the corpus PDFs (docs/formats.md, Documents: PDF)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.pdf import text_pdf

CORPUS = Path(__file__).resolve().parents[4].parent / "shared" / "corpus"
WIDTH = 36  # Courier 10 pt: 6 pt a character, a 216 pt column


def _justify(line: str, width: int = WIDTH) -> str:
    """``line`` spread to ``width`` characters (Courier: a full column line)."""
    words = line.split()
    gaps = len(words) - 1
    pad = width - sum(len(w) for w in words)
    assert gaps and pad >= gaps, line
    out = ""
    for i, word in enumerate(words[:-1]):
        out += word + " " * (pad // gaps + (1 if i < pad % gaps else 0))
    return out + words[-1]


def _column(x: float, top: float, paragraphs: list[list[str]]) -> list[Any]:
    """Body lines (Courier 10, 12 pt apart, a blank line between paragraphs): every line but
    a paragraph's last is justified to the column's width."""
    runs: list[Any] = []
    y = top
    for para in paragraphs:
        for i, line in enumerate(para):
            runs.append(("F1", 10, x, y, _justify(line) if i < len(para) - 1 else line))
            y -= 12
        y -= 12
    return runs


def _document() -> bytes:
    header = [("F1", 9, 72, 750, "Telha Quarterly Report"), ("F1", 9, 520, 750, "Q3")]
    page1 = [*header, ("F1", 9, 300, 40, "1")]
    page1 += [("F2", 20, 72, 700, "Annual Overview"), ("F2", 15, 72, 670, "Background")]
    page1 += _column(72, 646, [[
        "The layout pass reads the facts of",
        "the page: where each character is,",
        "its size and its weight, like Amer-",
        "ican readers of old ledgers did.",
    ]])  # fmt: skip
    page1.append(("F2", 12, 72, 574, "Details"))
    page1 += [
        ("F3", 10, 72, 552, "\xb7"), ("F1", 10, 86, 552, "First point of the list."),
        ("F3", 10, 72, 540, "\xb7"), ("F1", 10, 86, 540, _justify("Second point, which runs", 33)),
        ("F1", 10, 86, 528, "over two lines."),
        ("F3", 10, 72, 516, "\xb7"), ("F1", 10, 86, 516, "Third point."),
    ]  # fmt: skip
    page1 += _column(72, 492, [["A paragraph at the foot of the", "left column goes on in the"]])
    page1 = [r for r in page1 if r[4]]
    page1[-1] = ("F1", 10, 72, 480, _justify("left column goes on in the"))
    page1 += _column(324, 646, [
        ["right one, in the same words.", ],
        ["A closing paragraph of the first", "page ends here."],
    ])  # fmt: skip
    page1 += _column(324, 574, [[f"Filler line number {n} of the right" for n in range(4)]])
    page2 = [*header, ("F1", 9, 300, 40, "2"), ("F2", 15, 72, 700, "Results")]
    page2 += _column(72, 676, [["The second page has one paragraph.", "It is short."]])
    return text_pdf([page1, page2])


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    from docling_worker.convert import convert
    from docling_worker.pdf_blocks import pdf_blocks

    path = tmp_path_factory.mktemp("pdf") / "known.pdf"
    path.write_bytes(_document())
    return pdf_blocks(convert(path, "pdf"))


def test_known_structure_reading_order_kinds_levels(blocks: list[Any]) -> None:
    got = [(b.kind, b.level or b.list_level, b.text) for b in blocks]
    assert got == [
        ("heading", 1, "Annual Overview"),
        ("heading", 2, "Background"),
        ("paragraph", 0, "The layout pass reads the facts of the page: where each character "
                         "is, its size and its weight, like American readers of old ledgers "
                         "did."),
        ("heading", 3, "Details"),
        ("list_item", 1, "First point of the list."),
        ("list_item", 1, "Second point, which runs over two lines."),
        ("list_item", 1, "Third point."),
        ("paragraph", 0, "A paragraph at the foot of the left column goes on in the right "
                         "one, in the same words."),
        ("paragraph", 0, "A closing paragraph of the first page ends here."),
        ("paragraph", 0, "Filler line number 0 of the right Filler line number 1 of the right "
                         "Filler line number 2 of the right Filler line number 3 of the right"),
        ("heading", 2, "Results"),
        ("paragraph", 0, "The second page has one paragraph. It is short."),
        ("page_header", 0, "Telha Quarterly Report"),
        ("page_header", 0, "Q3"),
        ("page_footer", 0, "1"),
        ("page_header", 0, "Telha Quarterly Report"),
        ("page_header", 0, "Q3"),
        ("page_footer", 0, "2"),
    ]  # fmt: skip


def test_a_paragraph_across_columns_has_a_box_per_part(blocks: list[Any]) -> None:
    (across,) = [b for b in blocks if b.text.startswith("A paragraph at the foot")]
    assert [page for page, _box in across.parts] == [1, 1]
    (left, right) = [box for _page, box in across.parts]
    assert left[0] == 72 and right[0] == 324 and left[1] > right[1]  # lower left, upper right
    assert across.bbox == left
    others = [b for b in blocks if b is not across]
    assert all(len(b.parts) == 1 and b.parts[0] == (b.page, b.bbox) for b in others)


def _submission(path: Path) -> dict[str, Any]:
    import docling_worker

    from telha.domain.submission import decode_submission, to_projection
    from tests.unit.workers.docling_worker.test_docling_worker import _audit_spans, _job

    body = docling_worker.handle(_job(path))  # parsed in a child process
    assert isinstance(body, bytes)
    to_projection(decode_submission(body))  # core accepts it
    out = dict(json.loads(body))
    _audit_spans(out)  # every span slices to its node's text
    return out


def test_submission_sections_nest_and_running_lines_stay_out_of_the_text(
    tmp_path: Path,
) -> None:
    (tmp_path / "pdf").mkdir()
    path = tmp_path / "pdf" / "known.pdf"
    path.write_bytes(_document())
    out = _submission(path)
    assert out["stats"]["pdf_layout"] == "rules"
    nodes = out["nodes"]
    titles = {i: n["properties"].get("title") for i, n in enumerate(nodes)}
    nested = {
        (titles[r["fromRef"]], titles[r["toRef"]])
        for r in out["relationships"]
        if titles[r["fromRef"]] and titles[r["toRef"]]
    }
    assert nested == {
        ("Annual Overview", "Background"),
        ("Background", "Details"),
        ("Annual Overview", "Results"),
    }
    text = out["canonicalText"]
    assert "Telha Quarterly Report" not in text and "American readers" in text
    assert "∞" not in text and "•" not in text
    running = [n for n in nodes if n["labels"][0] in ("PAGE_HEADER", "PAGE_FOOTER")]
    assert [(n["labels"][0], n["properties"]["page"]) for n in running] == [
        ("PAGE_HEADER", 1), ("PAGE_HEADER", 1), ("PAGE_FOOTER", 1),
        ("PAGE_HEADER", 2), ("PAGE_HEADER", 2), ("PAGE_FOOTER", 2),
    ]  # fmt: skip
    assert all(not n.get("spanRefs") for n in running)
    items = [n["properties"] for n in nodes if n["properties"].get("label") == "list_item"]
    assert [(p["text"], p["list_level"]) for p in items] == [
        ("First point of the list.", 1),
        ("Second point, which runs over two lines.", 1),
        ("Third point.", 1),
    ]
    (across,) = [n["properties"] for n in nodes if "boxes" in n["properties"]]
    assert [b["page"] for b in across["boxes"]] == [1, 1]
    for node in nodes[1:]:
        assert node["properties"]["page"] in (1, 2) and len(node["properties"]["bbox"]) == 4


def _chunks(out: dict[str, Any], max_bytes: int) -> list[Any]:
    from telha.domain.chunking import ChunkNode, ChunkSpan, chunk_text

    holders: dict[int, list[bytes]] = {}
    nodes = {}
    for i, node in enumerate(out["nodes"]):
        key = i.to_bytes(16, "big")
        props = node["properties"]
        nodes[key] = ChunkNode(
            tuple(node["labels"]), props.get("title"), props.get("level"), props.get("page")
        )
        for ref in node.get("spanRefs", []):
            holders.setdefault(ref, []).append(key)
    spans = [
        ChunkSpan(s["start"], s["end"], s["kind"], tuple(holders.get(i, [])))
        for i, s in enumerate(out["spans"])
    ]
    return chunk_text(out["canonicalText"].encode(), spans, nodes, max_bytes=max_bytes)


def test_multi_page_headings_lists_and_heading_paths() -> None:
    """The corpus's multi_page.pdf: bold headings are SECTIONs (11, as docling's models find),
    a bullet's wrapped lines are one list item, bullets never read ``∞``, chunks carry their
    heading path."""
    out = _submission(CORPUS / "pdf" / "multi_page.pdf")
    sections = [n["properties"] for n in out["nodes"] if n["labels"] == ["SECTION"]]
    assert [s["title"] for s in sections[:3]] == [
        "The Evolution of the Word Processor",
        "Pre-Digital Era (19th - Early 20th Century)",
        "The Birth of Word Processing (1960s - 1970s)",
    ]
    assert len(sections) == 11 and "∞" not in out["canonicalText"]
    items = [n["properties"] for n in out["nodes"] if n["properties"].get("label") == "list_item"]
    assert items[0]["text"] == (
        "IBM MT/ST (Magnetic Tape/Selectric Typewriter): Introduced in 1964, this machine "
        "combined IBM's Selectric typewriter with magnetic tape storage. It allowed users to "
        "record, edit, and replay typed content-an early example of digital text storage."
    )
    assert len(items) == 26 and {i["list_level"] for i in items} == {1}
    chunks = _chunks(out, 512)
    text = out["canonicalText"].encode()
    (ibm,) = [c for c in chunks if b"IBM MT/ST" in text[c.start : c.end]]
    assert ibm.heading_path[-1] == "The Birth of Word Processing (1960s - 1970s)"
    assert all(c.heading_path for c in chunks[1:])


def test_two_columns_read_column_by_column_with_hyphenation_joined() -> None:
    """testPDF_bad_page_303226.pdf: the columns are no longer interleaved line by line; the
    paragraph from the left column's foot into the right column is one, ``Amer-`` + ``ican``
    joined, with a box per column; running headers and page numbers are out of the text."""
    out = _submission(CORPUS / "pdf" / "testPDF_bad_page_303226.pdf")
    text = out["canonicalText"]
    assert "keep distributes" not in text and "Amer-" not in text
    (peyote,) = [
        n["properties"]
        for n in out["nodes"]
        if n["properties"].get("text", "").startswith("The listing of peyote")
    ]
    assert (
        "distributes peyote to the Native American Church, however, is required" in (peyote["text"])
    )
    assert [(b["page"], b["bbox"][0]) for b in peyote["boxes"]] == [(1, 132.0), (1, 312.0)]
    assert "Drug Enforcement Administration, Justice" not in text
    footers = [n["properties"] for n in out["nodes"] if n["labels"] == ["PAGE_FOOTER"]]
    assert {"79", "80", "81"} <= {f["text"] for f in footers}
    titles = [n["properties"]["title"] for n in out["nodes"] if n["labels"] == ["SECTION"]]
    assert "§1307.22 Disposal of controlled substances by the Administration." in titles


def test_right_to_left_lines_read_right_to_left() -> None:
    """right_to_left_01.pdf (Arabic with Latin words): a line's parts join right to left, as
    docling's models read the title; the column is judged mirrored, so its ragged left edge
    does not cut paragraphs (four, set apart by blank lines)."""
    from docling_worker.convert import convert
    from docling_worker.pdf_blocks import pdf_blocks

    blocks = pdf_blocks(convert(CORPUS / "pdf" / "right_to_left_01.pdf", "pdf"))
    assert [b.kind for b in blocks] == ["heading"] + ["paragraph"] * 4
    assert blocks[0].text == "تحسين الإنتاجية وحل المشكلات من خلال البرمجة بلغة R و Python"
    assert blocks[1].text.startswith("تعتبر البرمجة بلغة R و Python من الأدوات القوية")
