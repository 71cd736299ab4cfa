"""E-mail doubt in ``stats.warnings`` (docs/formats.md, "Warnings"): a message cut before its
closing MIME boundary completes with what was read; an undecodable attachment is counted."""

from __future__ import annotations

from typing import Any

from tests.conftest import CORPUS
from tests.unit.workers.email_worker.test_email_worker import _run


def _kinds(sub: dict[str, Any]) -> dict[str, int]:
    return {w["kind"]: w["count"] for w in sub["stats"].get("warnings", [])}


def test_whole_corpus_message_has_no_warning() -> None:
    sub = _run((CORPUS / "eml/eml_with_attachment.eml").read_bytes())
    assert "warnings" not in sub["stats"] and sub["stats"]["child_jobs"] == 1


def test_message_without_its_closing_boundary_is_truncated() -> None:
    raw = (CORPUS / "eml/eml_with_attachment.eml").read_bytes()
    cut = raw[: raw.rindex(b"------=_Part_0_123456789.1234567890--")]
    sub = _run(cut)
    assert "This email contains an attachment." in sub["canonicalText"]
    assert sub["stats"]["child_jobs"] == 1  # the attachment before the cut is still read
    assert _kinds(sub) == {"truncated": 1}
    (warning,) = sub["stats"]["warnings"]
    assert warning["detail"] == "the closing MIME boundary never came"


def test_cut_inside_an_attachment_is_truncated_and_keeps_the_body() -> None:
    raw = (CORPUS / "eml/eml_with_attachment.eml").read_bytes()
    sub = _run(raw[: raw.index(b"bnRlbnQuCg==")])
    assert "Hello Bob," in sub["canonicalText"]
    assert _kinds(sub)["truncated"] == 1


def test_undecodable_attachment_is_counted() -> None:
    raw = (
        b"From: a@example.com\nSubject: x\nMIME-Version: 1.0\n"
        b'Content-Type: multipart/mixed; boundary="B"\n\n--B\nContent-Type: text/plain\n\nhi\n'
        b"--B\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64\n"
        b'Content-Disposition: attachment; filename="a.pdf"\n\nJVBE%%%!!\xff\n--B--\n'
    )
    assert _kinds(_run(raw)) == {"attachment_unreadable": 1}


def test_undeclared_legacy_body_is_guessed_with_confidence() -> None:
    body = "Добрый день! Высылаю отчёт за март, посмотрите, пожалуйста, до пятницы. " * 4
    raw = b"From: a@example.com\nSubject: x\n\n" + body.encode("cp1251")
    sub = _run(raw)
    assert body.strip() in sub["canonicalText"]
    (warning,) = sub["stats"]["warnings"]
    assert warning["kind"] == "encoding_fallback" and "cp1251" in warning["detail"]


def test_short_undeclared_legacy_text_stays_cp1252() -> None:
    sub = _run(b"From: a@example.com\nSubject: x\n\ncaf\xe9 \x80 ok\n")
    assert sub["canonicalText"].endswith("café € ok")
