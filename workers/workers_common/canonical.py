"""Canonical text (docs/worker-protocol.md): NFC, then CRLF and lone CR → LF, applied once."""

from __future__ import annotations

import unicodedata

__all__ = ["normalize_canonical"]


def normalize_canonical(text: str) -> str:
    """``text`` as canonical text: NFC, LF-only line endings. Idempotent."""
    if not (text.isascii() or unicodedata.is_normalized("NFC", text)):
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
