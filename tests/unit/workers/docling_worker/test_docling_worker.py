"""docling_worker: every corpus PDF/DOCX/PPTX/HTML file has its
documented outcome; spans slice to their block's text; the same bytes give the same
submission; geometry is top-left; the temporal ambiguity reaches the submission."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import blake3
import docling_worker
import pytest
from docling_worker.isolation import ChildPool, Limits, limits_from_env

from telha.domain.submission import decode_submission, to_projection
from tests.conftest import CORPUS
from workers_common import Job, ResourceLimit, TransientFailure, classify


def _job(path: Path, options: dict[str, Any] | None = None, name: str | None = None) -> Job:
    fmt = path.parent.name
    digest = blake3.blake3(path.read_bytes()).hexdigest()
    return Job("id", f"ingest:{fmt}", fmt, name or path.name, None, digest, options or {}, 0,
               "t", "o", path)  # fmt: skip


def _run(rel: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    body = docling_worker.handle(_job(CORPUS / rel, options))  # parsed in a child process
    to_projection(decode_submission(body))  # core accepts it
    return dict(json.loads(body))


def _count(out: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in out["nodes"]:
        counts[node["labels"][0]] = counts.get(node["labels"][0], 0) + 1
    return counts


# Expected outcome per corpus file: node counts by label, or the failure reason's start.
# Notes: PDFs run docling's model-free NativePdfPipeline; lines are grouped into paragraphs and
# headings by the model-free layout pass (docling_worker.pdf_lines, pdf_blocks); Strict.docx
# and footnotes.docx give docling's single paragraph (it reads neither strict OOXML body text
# nor footnotes).
EXPECTED: dict[str, dict[str, int] | str] = {
    "docx/Strict.docx": {"DOCUMENT": 1, "PARAGRAPH": 1},
    "docx/docx_lists.docx": {"DOCUMENT": 1, "SECTION": 10, "PARAGRAPH": 55},
    "docx/docx_rich_cells.docx": {
        "DOCUMENT": 1, "SECTION": 7, "TABLE": 9, "TABLE_ROW": 13, "PARAGRAPH": 59,
    },
    "docx/footnotes.docx": {"DOCUMENT": 1, "PARAGRAPH": 1},
    "docx/testWORD_protected_passtika.docx": "unsupported_feature: encrypted",
    "docx/testWORD_truncated.docx": "corrupt_input",
    "docx/unit_test_headers_numbered.docx": {"DOCUMENT": 1, "SECTION": 9, "PARAGRAPH": 30},
    "docx/word_sample.docx": {
        "DOCUMENT": 1, "PARAGRAPH": 19, "SECTION": 3, "TABLE": 1, "TABLE_ROW": 3,
    },
    "html/hyperlink_03.html": {"DOCUMENT": 1, "PARAGRAPH": 8},
    "html/table_06.html": {
        "DOCUMENT": 1, "SECTION": 1, "PARAGRAPH": 2, "TABLE": 4, "TABLE_ROW": 10,
    },
    "html/testArabicMisleadingCharset.html": {"DOCUMENT": 1, "PARAGRAPH": 3},
    "html/testHTMLBadScript.html": {"DOCUMENT": 1, "PARAGRAPH": 1},  # HTML5: docling_worker.html5
    "html/testHTML_charset_utf16le.html": {"DOCUMENT": 1, "PARAGRAPH": 1},
    "html/wiki_duck.html": {
        "DOCUMENT": 1, "SECTION": 21, "PARAGRAPH": 389, "TABLE": 2, "TABLE_ROW": 14,
    },
    "pdf/2305.03393v1-pg9.pdf": {"DOCUMENT": 1, "PARAGRAPH": 38, "SECTION": 4},
    "pdf/aes-256.pdf": "unsupported_feature: encrypted",
    "pdf/invisible_text_layer.pdf": {"DOCUMENT": 1, "PARAGRAPH": 2},
    "pdf/multi_page.pdf": {"DOCUMENT": 1, "SECTION": 11, "PARAGRAPH": 42},
    "pdf/normal_4pages.pdf": {"DOCUMENT": 1, "SECTION": 21, "PARAGRAPH": 82, "PAGE_HEADER": 2},
    "pdf/ocr_test_rotated_90.pdf": "unsupported_feature: ocr_required",
    "pdf/r6-empty-password.pdf": {"DOCUMENT": 1, "PARAGRAPH": 1},
    "pdf/right_to_left_01.pdf": {"DOCUMENT": 1, "SECTION": 1, "PARAGRAPH": 4},
    "pdf/simple1.pdf": {"DOCUMENT": 1, "PARAGRAPH": 8},
    "pdf/skipped_1page.pdf": {"DOCUMENT": 1, "PARAGRAPH": 27, "SECTION": 14},
    "pdf/testOCR.pdf": "unsupported_feature: ocr_required",
    "pdf/testPDF_bad_page_303226.pdf": {"DOCUMENT": 1, "SECTION": 29, "PARAGRAPH": 792,
                                        "PAGE_HEADER": 38, "PAGE_FOOTER": 35},
    "pdf/testPDF_no_extract_no_accessibility_owner_empty.pdf": {"DOCUMENT": 1, "PARAGRAPH": 1},
    "pdf/zen_of_python_corrupted.pdf": {"DOCUMENT": 1, "SECTION": 6, "PARAGRAPH": 19},
    "pptx/powerpoint_malformed_pictures.pptx": {"DOCUMENT": 1, "PARAGRAPH": 3},
    "pptx/powerpoint_sample.pptx": {
        "DOCUMENT": 1, "SECTION": 2, "TABLE": 1, "TABLE_ROW": 8, "PARAGRAPH": 23,
    },
    "pptx/pptx_chart.pptx": {"DOCUMENT": 1, "SECTION": 2, "PARAGRAPH": 1},
    "pptx/testPPT_groups.pptx": {"DOCUMENT": 1, "PARAGRAPH": 8, "SECTION": 1},
    "pptx/testPPT_various.pptx": {"DOCUMENT": 1, "PARAGRAPH": 27, "TABLE": 1, "TABLE_ROW": 1},
}  # fmt: skip


def test_every_corpus_document_has_an_expectation() -> None:
    files = {
        f"{p.parent.name}/{p.name}"
        for fmt in docling_worker.FORMATS
        if (CORPUS / fmt).is_dir()  # the image formats have no corpus folder
        for p in (CORPUS / fmt).iterdir()
    }
    assert files == set(EXPECTED)


#: The scanned PDFs keep today's failure with OCR off (test_ocr.py beside this file reads them).
OPTIONS: dict[str, dict[str, Any]] = {
    "pdf/ocr_test_rotated_90.pdf": {"ocr": "off"},
    "pdf/testOCR.pdf": {"ocr": "off"},
}


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_corpus_outcome(rel: str) -> None:
    expected = EXPECTED[rel]
    if isinstance(expected, str):
        with pytest.raises(Exception) as failure:
            docling_worker.handle(_job(CORPUS / rel, OPTIONS.get(rel)))
        assert classify(failure.value)[0].startswith(expected)
        return
    out = _run(rel)
    assert _count(out) == expected
    _audit_spans(out)


def _audit_spans(out: dict[str, Any]) -> None:
    """Every node's span slices to exactly its block's text."""
    text = out["canonicalText"].encode()

    def sliced(node: dict[str, Any], i: int = 0) -> str:
        span = out["spans"][node["spanRefs"][i]]
        return text[span["start"] : span["end"]].decode()

    for node in out["nodes"]:
        label, props = node["labels"][0], node["properties"]
        if label == "DOCUMENT":
            assert sliced(node) == out["canonicalText"]
        elif label == "SECTION":
            assert sliced(node) == props["title"]
        elif label == "PARAGRAPH":
            assert sliced(node) == props["text"]
        elif label == "TABLE_ROW":
            # Cells are typed (workers_common.cell_types): text cells read as written,
            # typed ones from a non-empty cell of the line, empty ones as nothing.
            values = [v for k, v in props.items() if k != "row"]
            line = sliced(node).split("\t")
            assert len(line) == len(values)
            for shown, value in zip(line, values, strict=True):
                if value is None:
                    assert shown == ""
                elif isinstance(value, str) and not shown[:4].isdigit():
                    assert shown == value
                else:
                    assert shown.strip() != ""
        elif label == "TABLE":
            assert sliced(node).count("\n") + 1 >= props["rows"]


def test_structure_of_a_docx_sections_lists_table() -> None:
    out = _run("docx/word_sample.docx")
    sections = [n["properties"] for n in out["nodes"] if n["labels"] == ["SECTION"]]
    assert [(s["title"], s["level"]) for s in sections] == [
        ("Swimming in the lake", 0),
        ("Let’s swim!", 1),
        ("Let’s eat", 2),
    ]
    items = [n["properties"] for n in out["nodes"] if n["properties"].get("label") == "list_item"]
    assert items[0] == {"text": "You can relax and look around", "label": "list_item",
                        "list_level": 1}  # fmt: skip
    (table,) = [n["properties"] for n in out["nodes"] if n["labels"] == ["TABLE"]]
    assert table["columns"][1:] == ["Food", "Calories per portion"] and table["rows"] == 3
    assert out["stats"]["skipped"] == {"pictures": 1}
    # Nesting: "Let's eat" (level 2) sits inside "Let's swim!" (level 1) inside the title.
    refs = {i: n["properties"].get("title") for i, n in enumerate(out["nodes"])}
    contains = {(refs[r["fromRef"]], refs[r["toRef"]]) for r in out["relationships"]}
    assert ("Let’s swim!", "Let’s eat") in contains
    assert ("Swimming in the lake", "Let’s swim!") in contains


def test_geometry_is_top_left_with_pages() -> None:
    for rel in ("pptx/powerpoint_sample.pptx", "pdf/multi_page.pdf"):
        out = _run(rel)
        placed = [n["properties"] for n in out["nodes"] if "bbox" in n["properties"]]
        assert placed, rel
        for props in placed:
            x0, y0, x1, y1 = props["bbox"]
            assert x0 <= x1 and y0 <= y1 and props["page"] >= 1
    assert _run("pdf/multi_page.pdf")["stats"]["pdf_pipeline"] == "native"
    pages = [n["properties"]["page"] for n in _run("pdf/multi_page.pdf")["nodes"][1:]]
    assert pages == sorted(pages) and pages[-1] == 5  # reading order follows the pages


def test_same_bytes_same_submission() -> None:
    for rel in ("docx/docx_rich_cells.docx", "pdf/normal_4pages.pdf", "html/wiki_duck.html"):
        first = docling_worker.handle(_job(CORPUS / rel))
        assert docling_worker.handle(_job(CORPUS / rel)) == first


def test_clarify_adds_the_document_ambiguity() -> None:
    plain = _run("docx/docx_lists.docx")
    assert "ambiguities" not in plain and plain["stats"]["ambiguities"] == 0
    out = _run("docx/docx_lists.docx", {"clarify": True})
    (amb,) = out["ambiguities"]
    assert amb["nodeRef"] == 0 and amb["kind"] == "undated"
    assert out["stats"]["ambiguities"] == 1


def test_unknown_option_is_refused() -> None:
    with pytest.raises(Exception) as failure:
        docling_worker.handle(_job(CORPUS / "docx/word_sample.docx", {"ocr": True}))
    assert classify(failure.value)[0].startswith("unsupported_feature: option")


def test_isolation_timeout_kills_the_child_and_the_next_job_gets_a_fresh_one() -> None:
    pool = ChildPool(Limits(timeout_s=0.2), size=1)  # a fresh child cannot even import docling
    with pytest.raises(ResourceLimit, match="timeout"):
        pool.convert(CORPUS / "docx/word_sample.docx", "docx", "w.docx", clarify=False)
    pool.limits = Limits(timeout_s=120)
    body = pool.convert(CORPUS / "docx/word_sample.docx", "docx", "w.docx", clarify=False)
    assert json.loads(body)["stats"]["tables"] == 1


def test_isolation_memory_ceiling_is_a_typed_failure_not_a_dead_worker() -> None:
    # A child over its ceiling usually dies at once (MemoryError while importing); in one
    # full CI run on a loaded machine it hung instead (an allocation failing inside a native
    # thread) and the time limit ended it: both are the typed failure this test is about.
    starved = ChildPool(Limits(mem_ceiling_mb=300, timeout_s=30), size=1)
    with pytest.raises((ResourceLimit, TransientFailure)) as failure:
        starved.convert(CORPUS / "pdf/normal_4pages.pdf", "pdf", "n.pdf", clarify=False)
    message = str(failure.value)
    assert "parser process died" in message or message.startswith("timeout: the parse took")


def test_isolation_page_limit() -> None:
    pool = ChildPool(Limits(max_pages=2, timeout_s=120), size=1)
    with pytest.raises(ResourceLimit, match=r"5 pages is over docling.max_pages \(2\)"):
        pool.convert(CORPUS / "pdf/multi_page.pdf", "pdf", "m.pdf", clarify=False)
    # The typed failure came over the pipe: the same child serves the next job.
    body = pool.convert(CORPUS / "pdf/simple1.pdf", "pdf", "s.pdf", clarify=False)
    assert json.loads(body)["stats"]["pages"] == 1


def test_limits_from_env() -> None:
    assert limits_from_env({}) == Limits()
    env = {"TELHA_DOCLING__MEM_CEILING_MB": "2048", "TELHA_DOCLING__TIMEOUT_S": "30",
           "TELHA_DOCLING__MAX_PAGES": "10"}  # fmt: skip
    assert limits_from_env(env) == Limits(2048, 30.0, 10)
    with pytest.raises(ValueError):
        limits_from_env({"TELHA_DOCLING__TIMEOUT_S": "0"})


def test_pdf_lines_become_paragraphs_headings_and_columns() -> None:
    from docling_worker.convert import convert
    from docling_worker.pdf_blocks import pdf_blocks

    ragged = pdf_blocks(convert(CORPUS / "pdf/multi_page.pdf", "pdf"))
    first = next(b for b in ragged if b.text.startswith("The concept of the word processor"))
    assert first.text.endswith("several technological milestones.")  # two lines, one block
    two_columns = pdf_blocks(convert(CORPUS / "pdf/normal_4pages.pdf", "pdf"))
    heading = next(b for b in two_columns if "들어가며" in b.text)
    assert heading.level >= 1 and heading.text == "1 들어가며"  # one baseline, merged
    for page in (2, 3):  # two-column body pages: the left column is read first
        blocks = [b for b in two_columns if b.page == page and not b.kind.startswith("page_")]
        sides = [b.bbox[0] > 306 for b in blocks]
        assert sides == sorted(sides) and sides[0] is False and sides[-1] is True


GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "docling_corpus.json"


def test_golden_submissions() -> None:
    """Counts and the BLAKE3 of each corpus document's submission, against a reviewed file.
    After an intended projection change, regenerate with ``TELHA_REGENERATE_GOLDEN=1`` and
    review the diff of tests/golden/docling_corpus.json."""
    found: dict[str, dict[str, Any]] = {}
    for rel, expected in sorted(EXPECTED.items()):
        if isinstance(expected, str):
            continue
        body = docling_worker.handle(_job(CORPUS / rel))
        assert isinstance(body, bytes)
        sub = json.loads(body)
        found[rel] = {
            "nodes": len(sub["nodes"]),
            "edges": len(sub["relationships"]),
            "spans": len(sub["spans"]),
            "blake3": blake3.blake3(body).hexdigest(),
        }
    if os.environ.get("TELHA_REGENERATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert json.loads(GOLDEN.read_text(encoding="utf-8")) == found


def test_layout_path_on_the_golden_docling_document() -> None:
    """The layout-model pipeline's output (a golden DoclingDocument built with docling-core,
    tests/support/docling_fixtures.py): nested sections, a list, a header table, pages and
    top-left boxes, the conflicting dates (temporal ambiguity)."""
    from docling_core.types.doc import DoclingDocument
    from docling_worker.projection import project_document

    from tests.support import docling_fixtures

    path = docling_fixtures.FOLDER / "contract.json"
    committed = path.read_text(encoding="utf-8")
    assert committed == docling_fixtures.build("contract")  # regenerate: python -m ...
    doc = DoclingDocument.model_validate_json(committed)
    out = project_document(doc, "contract.pdf", "pdf", clarify=True, pdf_pipeline="layout")
    to_projection(decode_submission(json.dumps(out).encode()))
    _audit_spans(out)
    titles = {i: n["properties"].get("title") for i, n in enumerate(out["nodes"])}
    contains = {
        (titles[r["fromRef"]], titles[r["toRef"]])
        for r in out["relationships"]
        if titles[r["fromRef"]] and titles[r["toRef"]]
    }
    assert contains == {
        ("Supply Agreement", "1. Scope"),
        ("1. Scope", "1.1 Delivery"),
        ("Supply Agreement", "2. Prices"),
    }
    (table,) = [n["properties"] for n in out["nodes"] if n["labels"] == ["TABLE"]]
    assert table == {
        "columns": ["Part", "Price (EUR)"],
        "rows": 2,
        "page": 2,
        "bbox": [72.0, 90.0, 540.0, 150.0],
    }
    rows = [n["properties"] for n in out["nodes"] if n["labels"] == ["TABLE_ROW"]]
    assert rows == [{"Part": "Bolt", "Price (EUR)": 0.12, "row": 1},
                    {"Part": "Nut", "Price (EUR)": 0.05, "row": 2}]  # fmt: skip
    assert out["stats"]["pdf_pipeline"] == "layout" and out["stats"]["pages"] == 2
    assert out["stats"]["pdf_layout"] == "models"  # docling's models keep precedence
    (amb,) = out["ambiguities"]
    assert [c["label"] for c in amb["candidates"]] == [
        "2026-04-01 (effective)",
        "2026-03-01 (signed)",
    ]
