"""Which Telha format a file is (``telha ingest --format auto``): its extension first, then
its first bytes.

Sniffing, when the extension says nothing Telha knows: ``%PDF-`` → ``pdf``; an image's magic
bytes → ``png``, ``jpeg``, ``tiff``, ``bmp`` or ``webp`` (read through OCR); an OLE2 (CFB)
container → ``msg``; a ZIP holding ``word/``, ``xl/`` or ``ppt/`` → ``docx``/``xlsx``/``pptx``,
another ZIP or a tar → ``code`` (an archive of sources); RFC 822 header lines (after an mbox
``From`` line, if any) → ``eml``; ``<!doctype html``/``<html`` → ``html``; a JSON object or
array → ``json``; other UTF-8 text → ``text``. Anything else: ``None`` (the caller reports the
file as refused).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

__all__ = ["BY_EXTENSION", "guess_format"]

#: File extension (lower case, no dot) → format.
BY_EXTENSION = {
    "json": "json", "txt": "text", "text": "text", "md": "markdown", "markdown": "markdown",
    "csv": "csv", "tsv": "tsv", "tab": "tsv", "xlsx": "xlsx", "pdf": "pdf", "docx": "docx",
    "pptx": "pptx", "html": "html", "htm": "html", "eml": "eml", "msg": "msg",
    "py": "code", "pyi": "code", "rs": "code", "js": "code", "mjs": "code", "cjs": "code",
    "jsx": "code", "ts": "code", "tsx": "code", "go": "code", "tar": "code", "tgz": "code",
    "png": "png", "jpg": "jpeg", "jpeg": "jpeg", "jpe": "jpeg", "tif": "tiff", "tiff": "tiff",
    "bmp": "bmp", "webp": "webp",
}  # fmt: skip
#: Leading bytes → image format (RIFF….WEBP is checked apart: its tag is at offset 8).
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpeg"), (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)  # fmt: skip
_HEADER_LINE = re.compile(
    rb"^(?:From|To|Subject|Date|Received|Message-ID|MIME-Version|Return-Path):", re.I
)
_SNIFF_BYTES = 4096


def _zip_format(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError):
        return "code"  # the worker says what is wrong with it
    for prefix, fmt in (("word/", "docx"), ("xl/", "xlsx"), ("ppt/", "pptx")):
        if any(n.startswith(prefix) for n in names):
            return fmt
    return "code"


def _image_format(head: bytes) -> str | None:
    for magic, fmt in _IMAGE_MAGIC:
        if head.startswith(magic):
            return fmt
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "webp"
    if head.startswith(b"BM") and head[6:10] == b"\x00\x00\x00\x00":  # reserved words: 0
        return "bmp"
    return None


def _sniff(path: Path, head: bytes) -> str | None:
    if head.startswith(b"%PDF-"):
        return "pdf"
    image = _image_format(head)
    if image is not None:
        return image
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "msg"
    if head.startswith(b"PK\x03\x04"):
        return _zip_format(path)
    if head[257:262] == b"ustar" or head.startswith(b"\x1f\x8b"):
        return "code"
    lines = head.lstrip().splitlines()
    if lines and lines[0].startswith(b"From ") and len(lines) > 1:  # an mbox envelope line
        lines = lines[1:]
    if lines and _HEADER_LINE.match(lines[0]):
        return "eml"
    lowered = head.lstrip()[:64].lower()
    if lowered.startswith((b"<!doctype html", b"<html")):
        return "html"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            return None
    return "json" if lowered[:1] in (b"{", b"[") else "text"


def guess_format(path: Path) -> str | None:
    """The format of the file at ``path`` (module docstring), or ``None``.

    :raises OSError: the file cannot be read.
    """
    name = path.name.lower()
    if name.endswith((".tar.gz", ".tar.bz2", ".tar.xz")):
        return "code"
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if ext == "zip":
        return _zip_format(path)
    if ext in BY_EXTENSION:
        return BY_EXTENSION[ext]
    with path.open("rb") as f:
        head = f.read(_SNIFF_BYTES)
    return _sniff(path, head)
