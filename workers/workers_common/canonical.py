"""Canonical text (docs/worker-protocol.md): NFC, then CRLF and lone CR → LF, and U+0000
dropped, applied once.

NUL is not text: C-string tools, many databases' text types and search tokenizers take it for
an end or refuse it. Every format drops it from canonical text and string properties and
counts what it dropped in ``stats.nul_chars`` (docs/formats.md, "Messy input").
"""

from __future__ import annotations

import unicodedata
from typing import Any

__all__ = ["NUL", "drop_nul", "normalize_canonical", "scrub_properties"]

#: The character dropped from every canonical text and string property.
NUL = "\x00"


def normalize_canonical(text: str) -> str:
    """``text`` as canonical text: NUL dropped, NFC, LF-only line endings. Idempotent."""
    if NUL in text:
        text = text.replace(NUL, "")
    if not (text.isascii() or unicodedata.is_normalized("NFC", text)):
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def drop_nul(text: str) -> tuple[str, int]:
    """``text`` without U+0000 and how many were dropped (characters)."""
    count = text.count(NUL)
    return (text.replace(NUL, ""), count) if count else (text, 0)


def scrub_properties(value: Any) -> tuple[Any, int]:
    """A property value (str, list, dict, scalar) with U+0000 dropped from every string in it,
    and how many were dropped. Values without NUL come back as the same objects."""
    if isinstance(value, str):
        return drop_nul(value)
    if isinstance(value, list):
        total = 0
        items = []
        for item in value:
            clean, n = scrub_properties(item)
            items.append(clean)
            total += n
        return (items, total) if total else (value, 0)
    if isinstance(value, dict):
        total = 0
        out = {}
        for key, item in value.items():
            clean_key, k = drop_nul(key) if isinstance(key, str) else (key, 0)
            clean, n = scrub_properties(item)
            out[clean_key] = clean
            total += k + n
        return (out, total) if total else (value, 0)
    return value, 0
