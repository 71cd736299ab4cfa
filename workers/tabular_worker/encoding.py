"""Character encoding of CSV/TSV input: detection and streaming transcoding to UTF-8.

Detection order (the result is reported as ``stats.encoding``, a Python codec name):

1. ``options.encoding`` when given;
2. a byte order mark: UTF-8 (``utf-8-sig``), UTF-16 LE/BE, UTF-32 LE/BE;
3. strict UTF-8 over the whole file (checked incrementally, :data:`CHUNK_BYTES` at a time);
4. a guess from the file's first bytes (:func:`workers_common.encoding_guess.guess_encoding`,
   chardet): ``stats.encoding_confidence`` tells how sure it is, and below
   :data:`~workers_common.encoding_guess.LOW_CONFIDENCE` an ``encoding_guessed`` warning
   says so (docs/formats.md, "Character encodings").

A NUL byte in the sample of a file without a UTF-16/32 BOM means binary content:
:class:`~workers_common.CorruptInput`. Input that is plain UTF-8 and needs no delimiter
substitution is parsed in place; anything else is transcoded, :data:`CHUNK_BYTES` at a time
through an incremental decoder, into a temporary UTF-8 file (memory stays bounded by the chunk).

**Lone CR line ends** (classic Mac OS exports): when the first :data:`SAMPLE_BYTES` hold a CR
and no LF, records end with a lone CR, which the CSV parser does not take for a line end; the
file is transcoded with every CR and CRLF turned into LF (``stats.line_ends: "cr"``). A CR
inside a quoted cell becomes LF too, which is what the cell's text would be normalized to
anyway.
"""

from __future__ import annotations

import codecs
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workers_common import CorruptInput, UnsupportedFeature
from workers_common.encoding_guess import Guess, guess_encoding

__all__ = ["CHUNK_BYTES", "SAMPLE_BYTES", "SUBSTITUTE", "Utf8Input", "utf8_input"]

#: Bytes read (and decoded) per step when checking or transcoding.
CHUNK_BYTES = 1 << 20
#: Bytes given to charset detection.
SAMPLE_BYTES = 1 << 20
#: The byte a non-ASCII delimiter is replaced with in the transcoded file (U+001F, the ASCII
#: unit separator), because polars only splits on single bytes.
SUBSTITUTE = "\x1f"

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True, slots=True)
class Utf8Input:
    """A UTF-8 file (no BOM) ready for parsing.

    :ivar path: the file (the job's own, or a temporary transcoded copy).
    :ivar encoding: the source encoding (Python codec name).
    :ivar delimiter_substituted: the non-ASCII delimiter was replaced by :data:`SUBSTITUTE`.
    :ivar lone_cr: records ended with a lone CR, rewritten as LF (module docstring).
    :ivar guess: the detector's guess when the encoding was guessed, else ``None``.
    """

    path: Path
    encoding: str
    delimiter_substituted: bool
    lone_cr: bool = False
    guess: Guess | None = None


def _bom(head: bytes) -> tuple[str, int] | None:
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    return None


def _is_utf8(path: Path) -> bool:
    decoder = codecs.getincrementaldecoder("utf-8")()
    with path.open("rb") as f:
        try:
            while chunk := f.read(CHUNK_BYTES):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
    return True


def _detect(sample: bytes) -> Guess:
    if b"\x00" in sample:
        raise CorruptInput("binary content: a NUL byte in a text table without a UTF-16 BOM")
    guess = guess_encoding(sample)
    if guess is None:
        raise CorruptInput("undecodable: no character encoding fits the bytes")
    return guess


def detect_encoding(path: Path, requested: str | None) -> tuple[str, int, Guess | None]:
    """``(codec name, BOM length in bytes, the guess if it was guessed)`` of the file at
    ``path`` (rules in the module doc).

    :raises CorruptInput: binary content, or no encoding fits.
    """
    with path.open("rb") as f:
        sample = f.read(SAMPLE_BYTES)
    bom = _bom(sample)
    if requested is not None:
        skip = bom[1] if bom is not None and codecs.lookup(bom[0]).name == requested else 0
        if requested == "utf-8" and sample.startswith(codecs.BOM_UTF8):
            skip = len(codecs.BOM_UTF8)
        return requested, skip, None
    if bom is not None:
        return bom[0], bom[1], None
    if _is_utf8(path):
        return "utf-8", 0, None
    guess = _detect(sample)
    return guess.encoding, 0, guess


def _lone_cr(path: Path, encoding: str, skip: int) -> bool:
    """Whether the file's records end with a lone CR (a CR and no LF in its first bytes)."""
    with path.open("rb") as f:
        f.seek(skip)
        sample = f.read(SAMPLE_BYTES)
    text = codecs.getincrementaldecoder(encoding)(errors="ignore").decode(sample)
    return "\r" in text and "\n" not in text


def _transcode(
    src: Path, dst: Path, encoding: str, skip: int, delimiter: str | None, lone_cr: bool = False
) -> None:
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    offset = skip
    held = ""  # a CR at a chunk's end: it may start a CRLF
    with src.open("rb") as fin, dst.open("w", encoding="utf-8", newline="") as fout:
        fin.seek(skip)
        while True:
            chunk = fin.read(CHUNK_BYTES)
            try:
                text = decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                raise CorruptInput(
                    f"undecodable: not {encoding} at byte {offset + exc.start}"
                ) from None
            if delimiter is not None:
                if SUBSTITUTE in text:
                    raise UnsupportedFeature(
                        "delimiter: a non-ASCII delimiter needs input free of U+001F"
                    )
                text = text.replace(delimiter, SUBSTITUTE)
            if lone_cr:
                text = held + text
                held = "\r" if chunk and text.endswith("\r") else ""
                text = text[: len(text) - len(held)].replace("\r\n", "\n").replace("\r", "\n")
            fout.write(text)
            offset += len(chunk)
            if not chunk:
                return


@contextmanager
def utf8_input(path: Path, requested: str | None, delimiter: str | None) -> Iterator[Utf8Input]:
    """The input at ``path`` as UTF-8 without BOM, for the ``with`` block.

    :param requested: ``options.encoding`` (a codec name) or ``None`` to detect.
    :param delimiter: the field delimiter if known; a non-ASCII one is substituted by
        :data:`SUBSTITUTE` while transcoding.
    :raises CorruptInput: undecodable in the chosen encoding, or binary.
    :raises UnsupportedFeature: a non-ASCII delimiter in input that already holds U+001F.
    """
    encoding, skip, guess = detect_encoding(path, requested)
    substitute = delimiter if delimiter is not None and not delimiter.isascii() else None
    lone_cr = _lone_cr(path, encoding, skip)
    if encoding == "utf-8" and skip == 0 and substitute is None and not lone_cr:
        if requested is not None and not _is_utf8(path):
            raise CorruptInput("undecodable: not utf-8 (the requested encoding)")
        yield Utf8Input(path, encoding, False)
        return
    fd, name = tempfile.mkstemp(prefix="telha-tabular-", suffix=".csv")
    os.close(fd)
    try:
        _transcode(path, Path(name), encoding, skip, substitute, lone_cr)
        yield Utf8Input(Path(name), encoding, substitute is not None, lone_cr, guess)
    finally:
        os.unlink(name)
