"""Canonical text and naming rules (docs/architecture.md, docs/rest-api.md).

Canonical text is NFC with LF-only line endings; offsets into it are UTF-8 byte offsets.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "is_boundary",
    "is_continuation",
    "is_label",
    "nfc",
    "normalize_canonical",
    "upper_snake",
]

_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_LABEL = re.compile(r"^[A-Z0-9]+(?:_[A-Z0-9]+)*$")


def is_continuation(byte: int) -> bool:
    """Whether ``byte`` is a UTF-8 continuation byte (``0b10xxxxxx``): an offset pointing at
    it falls inside a character, never on a boundary."""
    return (byte & 0xC0) == 0x80


def is_boundary(text: bytes, pos: int) -> bool:
    """Whether byte offset ``pos`` of UTF-8 ``text`` is on a character boundary (the end,
    ``pos == len(text)``, and past it count as boundaries: the caller checks the range)."""
    return pos >= len(text) or not is_continuation(text[pos])


def nfc(text: str) -> str:
    """``text`` in Unicode NFC; returns ``text`` itself when it already is (the common case)."""
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def normalize_canonical(text: str) -> str:
    """NFC, then CRLF and lone CR → LF, applied once (as ``workers_common`` does)."""
    text = nfc(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _fold(text: str) -> str:
    """Accents dropped (NFKD, combining marks removed): ``relatório`` → ``relatorio``."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def upper_snake(name: str) -> str:
    """UPPER_SNAKE of a name (docs/rest-api.md): drop folders, strip the last extension, split
    camelCase, runs of non-alphanumerics → ``_``, trim ``_``, upper-case.

    ``"risks-2026-07.json"`` → ``"RISKS_2026_07"``; ``"homeAddress"`` → ``"HOME_ADDRESS"``.
    Returns ``""`` when nothing alphanumeric is left.
    """
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    stem, dot, _ext = base.rpartition(".")
    if dot and stem:
        base = stem
    base = _fold(base)
    base = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", base))
    return _NON_ALNUM.sub("_", base).strip("_").upper()


def key_snake(key: str) -> str:
    """UPPER_SNAKE of a JSON key (no extension stripping: ``"a.b"`` → ``"A_B"``)."""
    base = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", _fold(key)))
    return _NON_ALNUM.sub("_", base).strip("_").upper()


def is_label(label: str) -> bool:
    """True for an UPPER_SNAKE node label or edge type (``[A-Z0-9]+`` runs joined by ``_``)."""
    return bool(_LABEL.match(label))
