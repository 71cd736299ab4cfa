"""HTML read as a browser reads it (docling_worker.html5; docs/formats.md, "HTML"), and the
docling worker's ``stats.warnings`` (docs/formats.md, "Warnings"): skipped pictures, a lost
body, a PDF cut before its trailer (docling_worker.cut_short)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docling_worker
from docling_worker.html5 import html5_bytes, note_lost_body

from telha.domain.submission import decode_submission, to_projection
from tests.unit.workers.docling_worker.test_docling_worker import CORPUS, _job


def _html(tmp_path: Path, raw: bytes) -> dict[str, Any]:
    folder = tmp_path / "html"
    folder.mkdir(exist_ok=True)
    path = folder / "page.html"
    path.write_bytes(raw)
    body = docling_worker.handle(_job(path))
    assert isinstance(body, bytes)
    to_projection(decode_submission(body))  # core accepts stats.warnings
    return dict(json.loads(body))


def test_bad_script_end_tag_does_not_swallow_the_body() -> None:
    body = docling_worker.handle(_job(CORPUS / "html/testHTMLBadScript.html"))
    assert isinstance(body, bytes)
    out = json.loads(body)
    assert out["canonicalText"] == "This is a test."
    assert [n["labels"] for n in out["nodes"]] == [["DOCUMENT"], ["PARAGRAPH"]]
    assert "warnings" not in out["stats"]


def test_misnested_and_unclosed_tags_as_a_browser_builds_them(tmp_path: Path) -> None:
    raw = (
        b"<html><head><title>t</title><style>p{}</style foo></head><body>"
        b"<p>one <b>two <i>three</b> four</i><p>five<table><tr><td>a<td>b</table>"
        b"<script>if (a</b) x()</script><p>six</p>"
    )
    out = _html(tmp_path, raw)
    text = out["canonicalText"]
    assert "one two three four" in text and "five" in text and "six" in text
    assert "x()" not in text


def test_meta_charset_still_decides_the_encoding(tmp_path: Path) -> None:
    raw = '<meta charset="windows-1253"><p>Λεωνίδας</p>'.encode("cp1253")
    assert "Λεωνίδας" in _html(tmp_path, raw)["canonicalText"]
    reparsed, shown = html5_bytes(raw)
    assert reparsed.startswith(b"\xef\xbb\xbf") and shown == "Λεωνίδας"


def test_a_projection_that_lost_the_body_says_so() -> None:
    raw = b"<p>" + b"words that a browser shows " * 10 + b"</p>"
    lost: dict[str, Any] = {"canonicalText": "", "stats": {"bytes": 0}}
    note_lost_body(lost, raw)
    assert lost["stats"]["warnings"] == [
        {"kind": "html_body_lost", "count": 1,
         "detail": "the page shows 220 characters; the text holds 0"}
    ]  # fmt: skip
    kept: dict[str, Any] = {"canonicalText": "words that a browser shows " * 10, "stats": {}}
    note_lost_body(kept, raw)
    assert "warnings" not in kept["stats"]


def test_skipped_pictures_are_a_warning() -> None:
    out = json.loads(docling_worker.handle(_job(CORPUS / "html/wiki_duck.html")))
    skipped = out["stats"]["skipped"].get("pictures", 0)
    assert skipped > 0
    kinds = {w["kind"]: w["count"] for w in out["stats"]["warnings"]}
    assert kinds["pictures_skipped"] == skipped
    assert "html_body_lost" not in kinds


def test_pdf_without_its_trailer_completes_truncated(tmp_path: Path) -> None:
    raw = (CORPUS / "pdf/multi_page.pdf").read_bytes()
    folder = tmp_path / "pdf"
    folder.mkdir()
    (folder / "cut.pdf").write_bytes(raw[: raw.rindex(b"startxref")])
    out = json.loads(docling_worker.handle(_job(folder / "cut.pdf")))
    whole = json.loads(docling_worker.handle(_job(CORPUS / "pdf/multi_page.pdf")))
    assert out["canonicalText"] == whole["canonicalText"]  # every page was still there
    assert out["stats"]["warnings"] == [
        {"kind": "truncated", "count": 1,
         "detail": "no %%EOF trailer: the file ends early; what could be read is kept"}
    ]  # fmt: skip
    assert "warnings" not in whole["stats"]
