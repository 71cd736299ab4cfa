"""docling_worker OCR (docs/formats.md, "OCR"): the corpus' scanned PDFs read with page, box
and confidence (the turned one upright); page images made from corpus text round-trip under
the character error rate targets in every image format; the limits, a corrupt image, a
missing tesseract and ``options.ocr`` end as their documented failure kinds."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import blake3
import docling_worker
import pytest
from docling_worker.isolation import ChildPool, Limits
from PIL import Image

from telha.domain.submission import decode_submission, to_projection
from tests.conftest import CORPUS
from tests.support.ocr_pages import cer, corpus_words, render_page
from workers_common import Job, classify


def _job(path: Path, fmt: str, options: dict[str, Any] | None = None) -> Job:
    digest = blake3.blake3(path.read_bytes()).hexdigest()
    return Job("id", f"ingest:{fmt}", fmt, path.name, None, digest, options or {}, 0,
               "t", "o", path)  # fmt: skip


def _run(path: Path, fmt: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    body = docling_worker.handle(_job(path, fmt, options))
    assert isinstance(body, bytes)
    to_projection(decode_submission(body))  # core accepts it
    return dict(json.loads(body))


def _failure(path: Path, fmt: str, options: dict[str, Any] | None = None) -> str:
    with pytest.raises(Exception) as failure:
        docling_worker.handle(_job(path, fmt, options))
    return classify(failure.value)[0]


def _blocks(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [n["properties"] for n in out["nodes"] if n["labels"][0] in ("SECTION", "PARAGRAPH")]


def _audit(out: dict[str, Any], size: tuple[float, float], pages: int = 1) -> None:
    """Spans slice to their block's text; boxes lie inside their page; confidences 0–100."""
    text = out["canonicalText"].encode()
    for node in out["nodes"]:
        props = node["properties"]
        span = out["spans"][node["spanRefs"][0]]
        sliced = text[span["start"] : span["end"]].decode()
        if node["labels"][0] == "DOCUMENT":
            assert sliced == out["canonicalText"]
            assert props["pages"] == pages
            continue
        assert sliced == props.get("text", props.get("title"))
        assert 1 <= props["page"] <= pages
        x0, y0, x1, y1 = props["bbox"]
        assert 0 <= x0 < x1 <= size[0] + 0.01 and 0 <= y0 < y1 <= size[1] + 0.01, props
        assert 0 <= props["ocr_confidence"] <= 100
    stats = out["stats"]
    assert stats["ocr_pages"] == pages and stats["ocr_seconds"] > 0
    assert isinstance(stats["ocr_low_confidence_words"], int)


def _save(image: Image.Image, folder: Path, name: str, fmt: str, **params: Any) -> Path:
    path = folder / name
    image.save(path, format=fmt, **params)
    return path


@pytest.fixture(scope="module")
def paragraph() -> list[str]:
    """About 70 words of corpus prose (the second paragraph of ``multi_page.pdf`` on)."""
    return list(corpus_words()[20:90])


def test_scanned_pdf_reads_its_text_with_page_bbox_and_confidence() -> None:
    out = _run(CORPUS / "pdf" / "testOCR.pdf", "pdf")
    assert cer("Happy New Year 2003!", out["canonicalText"]) <= 0.02, out["canonicalText"]
    _audit(out, (792.0, 612.0))  # PDF points, top-left origin
    assert out["stats"]["pdf_pipeline"] == "native"
    doc = out["nodes"][0]["properties"]
    assert doc["ocr_confidence"] > 50


def test_a_turned_scan_reads_upright() -> None:
    out = _run(CORPUS / "pdf" / "ocr_test_rotated_90.pdf", "pdf")
    text = out["canonicalText"]
    # The page is shown turned: its text reads upright only after OSD turns it back.
    for phrase in ("PDF", "document"):
        assert phrase in text, text[:400]
    assert out["nodes"][0]["properties"]["ocr_confidence"] > 70
    _audit(out, (841.93, 595.21))  # the page as a viewer shows it (landscape)


@pytest.mark.parametrize("rel", ["pdf/testOCR.pdf", "pdf/ocr_test_rotated_90.pdf"])
def test_ocr_off_keeps_ocr_required(rel: str) -> None:
    assert _failure(CORPUS / rel, "pdf", {"ocr": "off"}).startswith(
        "unsupported_feature: ocr_required"
    )


def test_bad_ocr_option_is_named() -> None:
    reason = _failure(CORPUS / "pdf" / "testOCR.pdf", "pdf", {"ocr": "always"})
    assert reason.startswith("unsupported_feature: option: ocr must be one of auto, force, off")


def test_force_reads_a_text_pdf_through_ocr() -> None:
    native = _run(CORPUS / "pdf" / "simple1.pdf", "pdf")
    forced = _run(CORPUS / "pdf" / "simple1.pdf", "pdf", {"ocr": "force"})
    assert "ocr_pages" not in native["stats"]
    assert forced["stats"]["ocr_pages"] == 1

    # simple1.pdf's text layer spaces some words out ("H e l l o"): compare the letters.
    def letters(out: dict[str, Any]) -> list[str]:
        return sorted(c for c in out["canonicalText"] if not c.isspace())

    assert letters(forced) == letters(native)
    assert "Hello World" in forced["canonicalText"]


def test_png_paragraph_round_trips(tmp_path: Path, paragraph: list[str]) -> None:
    image, drawn = render_page(paragraph, 300)
    path = _save(image, tmp_path, "page.png", "PNG", dpi=(300, 300))
    out = _run(path, "png")
    assert cer(drawn, out["canonicalText"]) <= 0.02, out["canonicalText"]
    _audit(out, image.size)  # pixels
    assert "pdf_pipeline" not in out["stats"]
    again = _run(path, "png")  # deterministic, but for the time OCR took
    for body in (out, again):
        body["stats"].pop("ocr_seconds")
    assert again == out


def test_a_turned_image_reads_upright(tmp_path: Path, paragraph: list[str]) -> None:
    image, drawn = render_page(paragraph[:40], 300, rotate=90)
    out = _run(_save(image, tmp_path, "turned.png", "PNG", dpi=(300, 300)), "png")
    assert cer(drawn, out["canonicalText"]) <= 0.02, out["canonicalText"]
    _audit(out, image.size)  # boxes on the image as it is (turned)


def test_a_noisy_low_resolution_image(tmp_path: Path, paragraph: list[str]) -> None:
    image, drawn = render_page(paragraph[:40], 150, noise=0.02)
    out = _run(_save(image, tmp_path, "noisy.png", "PNG", dpi=(150, 150)), "png")
    assert cer(drawn, out["canonicalText"]) <= 0.05, out["canonicalText"]


@pytest.mark.parametrize(("fmt", "pil"), [("jpeg", "JPEG"), ("bmp", "BMP"), ("webp", "WEBP")])
def test_image_formats(tmp_path: Path, paragraph: list[str], fmt: str, pil: str) -> None:
    image, drawn = render_page(paragraph[:12], 300)
    image = image.crop((0, 0, image.width, 600))
    params: dict[str, Any] = {"quality": 95} if fmt in ("jpeg", "webp") else {}
    out = _run(_save(image, tmp_path, f"page.{fmt}", pil, **params), fmt)
    assert cer(drawn, out["canonicalText"]) <= 0.02, out["canonicalText"]
    _audit(out, image.size)


def test_multi_page_tiff_pages(tmp_path: Path, paragraph: list[str]) -> None:
    first, text1 = render_page(paragraph[:8], 300)
    second, text2 = render_page(paragraph[8:16], 300)
    first, second = (im.crop((0, 0, im.width, 500)) for im in (first, second))
    path = tmp_path / "fax.tiff"
    first.save(path, format="TIFF", save_all=True, append_images=[second], dpi=(300, 300))
    out = _run(path, "tiff")
    _audit(out, first.size, pages=2)
    by_page: dict[int, str] = {}
    for props in _blocks(out):
        by_page[props["page"]] = f"{by_page.get(props['page'], '')} {props['text']}"
    assert cer(text1, by_page[1]) <= 0.02 and cer(text2, by_page[2]) <= 0.02, by_page


def test_a_corrupt_image_is_corrupt_input(tmp_path: Path, paragraph: list[str]) -> None:
    image, _ = render_page(paragraph[:8], 150)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(buffer.getvalue()[:2000])
    assert _failure(truncated, "png").startswith("corrupt_input")
    not_an_image = tmp_path / "words.jpeg"
    not_an_image.write_bytes(b"these are words, not a picture\n" * 20)
    assert _failure(not_an_image, "jpeg").startswith("corrupt_input")


def test_an_image_with_ocr_off_is_refused(tmp_path: Path, paragraph: list[str]) -> None:
    image, _ = render_page(paragraph[:4], 150)
    path = _save(image, tmp_path, "p.png", "PNG")
    assert _failure(path, "png", {"ocr": "off"}).startswith("unsupported_feature: ocr_required")


def _pool_failure(path: Path, fmt: str) -> str:
    """The failure of a parse in a fresh pool (its children read the environment the test
    set; the module's shared pool keeps the defaults)."""
    pool = ChildPool(Limits(timeout_s=120))
    try:
        with pytest.raises(Exception) as failure:
            pool.convert(path, fmt, path.name, clarify=False)
        return classify(failure.value)[0]
    finally:
        with pool.child() as child:
            child.kill()


def test_limits_and_a_missing_tesseract(
    tmp_path: Path, paragraph: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = [render_page(paragraph[i : i + 3], 150)[0].crop((0, 0, 1275, 300)) for i in (0, 3)]
    path = tmp_path / "two.tiff"
    pages[0].save(path, format="TIFF", save_all=True, append_images=pages[1:])
    monkeypatch.setenv("TELHA_OCR__MAX_PAGES", "1")
    reason = _pool_failure(path, "tiff")
    assert reason.startswith("resource_limit") and "ocr.max_pages (1)" in reason, reason
    monkeypatch.delenv("TELHA_OCR__MAX_PAGES")
    monkeypatch.setenv("TELHA_OCR__PAGE_TIMEOUT_S", "0.001")
    reason = _pool_failure(path, "tiff")
    assert reason.startswith("resource_limit") and "page 1" in reason, reason
    monkeypatch.delenv("TELHA_OCR__PAGE_TIMEOUT_S")
    monkeypatch.setenv("TELHA_OCR__TESSERACT", str(tmp_path / "no-tesseract"))
    reason = _pool_failure(path, "tiff")
    assert reason.startswith("unsupported_feature: ocr_unavailable"), reason
    monkeypatch.setenv("TELHA_OCR__TESSERACT", "")
    monkeypatch.setenv("TELHA_OCR__LANGUAGES", "eng,xx_not_installed")
    reason = _pool_failure(path, "tiff")
    assert reason.startswith("unsupported_feature: ocr_unavailable"), reason


def test_a_transparent_png_reads_as_on_white(tmp_path: Path, paragraph: list[str]) -> None:
    image, drawn = render_page(paragraph[:10], 300)
    image = image.crop((0, 0, image.width, 500))
    ink = Image.new("LA", image.size, (0, 0))  # black ink, alpha from the page's darkness
    ink.putalpha(image.point(lambda v: 255 - v))
    out = _run(_save(ink, tmp_path, "clear.png", "PNG"), "png")
    assert cer(drawn, out["canonicalText"]) <= 0.02, out["canonicalText"]


def test_auto_reads_only_the_pages_without_text(tmp_path: Path) -> None:
    import pypdfium2

    mixed = pypdfium2.PdfDocument.new()
    for rel in ("pdf/simple1.pdf", "pdf/testOCR.pdf"):
        source = pypdfium2.PdfDocument(str(CORPUS / rel))
        mixed.import_pages(source)
        source.close()
    path = tmp_path / "mixed.pdf"
    mixed.save(str(path))
    mixed.close()
    out = _run(path, "pdf")
    assert out["stats"]["ocr_pages"] == 1
    blocks = _blocks(out)
    native = [b for b in blocks if b["page"] == 1]
    scanned = [b for b in blocks if b["page"] == 2]
    assert native and all("ocr_confidence" not in b for b in native)
    assert [b["text"] for b in scanned] == ["Happy New Year 2003!"]
    assert scanned[0]["ocr_confidence"] > 50
    assert out["canonicalText"].endswith("Happy New Year 2003!")
