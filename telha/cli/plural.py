"""Counted nouns in messages a person reads: ``1 job``, ``2 jobs``, ``0 files``."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"<count> <noun>"``, the noun in the plural (``many``, default ``noun + "s"``)
    unless ``count`` is exactly 1."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"
