"""The client's pure parts: every REST error code has its own class; formats are
guessed from the extension, then from the content, for every kind of corpus file."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from telha.client import errors
from telha.client.formats import guess_format
from tests.conftest import CORPUS


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "INVALID_CONTENT", errors.InvalidContent),
        (400, "INVALID_REQUEST", errors.InvalidRequest),
        (401, "UNAUTHENTICATED", errors.Unauthenticated),
        (404, "NOT_FOUND", errors.NotFound),
        (410, "CONTENT_ERASED", errors.ContentErased),
        (408, "REQUEST_TIMEOUT", errors.RequestTimeout),
        (413, "PAYLOAD_TOO_LARGE", errors.PayloadTooLarge),
        (503, "UNAVAILABLE", errors.Unavailable),
        (500, "INTERNAL", errors.InternalError),
    ],
)
def test_each_code_has_its_class(status: int, code: str, cls: type[errors.TelhaError]) -> None:
    exc = errors.error_for(status, code, "why")
    assert type(exc) is cls and isinstance(exc, errors.TelhaError)
    assert (exc.status, exc.code, exc.message) == (status, code, "why")
    assert str(exc) == f"{code} ({status}): why"


def test_unknown_or_missing_codes_keep_what_the_server_said() -> None:
    exc = errors.error_for(418, "TEAPOT", "short and stout")
    assert type(exc) is errors.TelhaError and exc.code == "TEAPOT"
    assert errors.error_for(502, None, "bad gateway").code == "HTTP_502"


# Corpus folders whose files all have one format (by extension and by content).
FOLDERS = {"csv": "csv", "xlsx": "xlsx", "docx": "docx", "pptx": "pptx", "pdf": "pdf",
           "eml": "eml", "msg": "msg", "html": "html"}  # fmt: skip


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_corpus_formats_by_extension_and_by_content(folder: str, tmp_path: Path) -> None:
    for path in sorted((CORPUS / folder).iterdir()):
        assert guess_format(path) == FOLDERS[folder], path
        unnamed = tmp_path / "unnamed"  # no extension: the bytes alone decide
        unnamed.write_bytes(path.read_bytes())
        sniffed = guess_format(unnamed)
        if folder in ("csv", "html"):  # text: csv sniffs as text; an HTML fragment may too
            assert sniffed in ("text", folder, None), path
        elif folder == "docx" and path.name.startswith("testWORD_protected"):
            assert sniffed == "msg"  # an encrypted Office file is a CFB container
        elif folder == "xlsx" and path.name.startswith("protected"):
            assert sniffed == "msg"
        elif folder == "docx" and "truncated" in path.name:
            assert sniffed == "code"  # a broken zip: the worker says what is wrong
        else:
            assert sniffed == FOLDERS[folder], path


def test_code_archives_json_text_and_binary(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("src/a.py", "x = 1\n")
    (tmp_path / "repo.zip").write_bytes(buf.getvalue())
    (tmp_path / "repo").write_bytes(buf.getvalue())
    (tmp_path / "data").write_bytes(b' [{"a": 1}]')
    (tmp_path / "notes").write_bytes("Plain words, ünïcode.\n".encode())
    (tmp_path / "blob").write_bytes(b"\x00\xff\xfe\x80" * 100)
    (tmp_path / "src.tar.gz").write_bytes(b"")
    (tmp_path / "main.rs").write_bytes(b"fn main() {}\n")
    got = {p.name: guess_format(p) for p in sorted(tmp_path.iterdir())}
    assert got == {"blob": None, "data": "json", "main.rs": "code", "notes": "text",
                   "repo": "code", "repo.zip": "code", "src.tar.gz": "code"}  # fmt: skip
