"""The OCR plumbing around the worker (docs/formats.md, "OCR"): image formats known to core
and found by extension and magic bytes in the CLI's detection; ``[ocr]`` defaults, its
errors naming the dotted key, and the ``TELHA_OCR__*`` settings the worker reads."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from docling_worker.ocr import OcrSettings, ocr_settings
from PIL import Image

from telha.client.formats import guess_format
from telha.config import ConfigError, load_config
from telha.ingest.request import KNOWN_FORMATS


def _image_bytes(pil: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (8, 8), 255).save(buffer, format=pil)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("pil", "fmt", "ext"),
    [("PNG", "png", "png"), ("JPEG", "jpeg", "jpg"), ("TIFF", "tiff", "tif"),
     ("BMP", "bmp", "bmp"), ("WEBP", "webp", "webp")],
)  # fmt: skip
def test_images_are_found_by_extension_and_magic_bytes(
    tmp_path: Path, pil: str, fmt: str, ext: str
) -> None:
    assert fmt in KNOWN_FORMATS
    data = _image_bytes(pil)
    named = tmp_path / f"scan.{ext.upper()}"
    named.write_bytes(data)
    assert guess_format(named) == fmt
    unnamed = tmp_path / "scan"  # no extension: the bytes alone decide
    unnamed.write_bytes(data)
    assert guess_format(unnamed) == fmt


def test_text_that_starts_like_an_image_is_still_text(tmp_path: Path) -> None:
    path = tmp_path / "notes"
    path.write_bytes(b"BMW service notes: oil changed, tyres rotated.\n")
    assert guess_format(path) == "text"


def test_ocr_section_defaults_and_errors(tmp_path: Path) -> None:
    cfg, _base = load_config(None, {})
    assert cfg.ocr.languages == ["eng"] and cfg.ocr.dpi == 300
    assert cfg.ocr.min_confidence == 30 and cfg.ocr.max_pages == 500
    assert cfg.ocr.page_timeout_s == 120
    for text, key in [
        ("[ocr]\ndpi = 10", "ocr.dpi"),
        ("[ocr]\nlanguages = []", "ocr.languages"),
        ("[ocr]\nlanguages = ['eng; rm']", "ocr.languages"),
        ("[ocr]\nmin_confidence = 101", "ocr.min_confidence"),
        ("[ocr]\nmax_pages = 0", "ocr.max_pages"),
        ("[ocr]\npage_timeout_s = 0", "ocr.page_timeout_s"),
        ("[ocr]\nengine = 'cuneiform'", "ocr.engine"),
    ]:
        path = tmp_path / "c.toml"
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(path, {})
        assert info.value.key == key, text


def test_worker_settings_from_the_environment() -> None:
    assert ocr_settings({}) == OcrSettings()
    got = ocr_settings(
        {"TELHA_OCR__LANGUAGES": "eng, deu", "TELHA_OCR__DPI": "200",
         "TELHA_OCR__MIN_CONFIDENCE": "50", "TELHA_OCR__MAX_PAGES": "3",
         "TELHA_OCR__PAGE_TIMEOUT_S": "9.5"}
    )  # fmt: skip
    assert got == OcrSettings(("eng", "deu"), 200, 50.0, 3, 9.5)
    with pytest.raises(ValueError):
        ocr_settings({"TELHA_OCR__DPI": "0"})
    with pytest.raises(ValueError):
        ocr_settings({"TELHA_OCR__LANGUAGES": " , "})


def test_a_missing_tesseract_is_said_at_start() -> None:
    env = {**os.environ, "TELHA_OCR__TESSERACT": "/nonexistent/tesseract"}
    done = subprocess.run(
        [sys.executable, "-c", "import docling_worker"],
        capture_output=True, text=True, env=env, check=True, cwd=Path(__file__).parents[3],
    )  # fmt: skip
    assert "ocr_unavailable: tesseract not found" in done.stderr
    env["TELHA_OCR__TESSERACT"] = ""
    done = subprocess.run(
        [sys.executable, "-c", "import docling_worker"],
        capture_output=True, text=True, env=env, check=True, cwd=Path(__file__).parents[3],
    )  # fmt: skip
    assert "ocr_unavailable" not in done.stderr  # Debian's tesseract is installed
