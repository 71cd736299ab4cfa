"""The index's forms of canonical text for full-text search (docs/architecture.md,
"Search"): pure. Words are cut and folded by :mod:`telha.domain.folding` — the one
definition of "the same word", shared by the index writer, the query parser and the match
finder — and this module writes them the way each engine indexes them:

- **SQLite** (FTS5 with the ``ascii`` tokenizer, which splits only at ASCII punctuation and
  spaces and lower-cases only ASCII letters): the span's folded words separated by spaces
  (:func:`fts5_body`), so FTS5 indexes exactly Telha's words and never cuts or folds one
  itself. An ASCII span whose words fit :data:`MAX_WORD` is stored as it is: the tokenizer
  cuts and folds it exactly as :func:`~telha.domain.folding.words` does.
- **PostgreSQL**: a ``tsvector`` literal of the same folded words with their positions
  (:func:`tsvector_literal`); no server parser or dictionary decides what a word is.
- Offsets are UTF-8 **byte** offsets into the canonical text, like every offset of the API.
"""

from __future__ import annotations

import re

from telha.domain.folding import MAX_WORD, Word, fold, folded_words, words

__all__ = [
    "MAX_WORD",
    "MAX_WORDS",
    "Word",
    "fold",
    "folded_words",
    "fts5_body",
    "is_verbatim",
    "snippet",
    "tsvector_literal",
    "words",
]

#: Words of one span PostgreSQL indexes (the rest of a larger span is not searchable there:
#: a ``tsvector`` holds at most 1 MiB).
MAX_WORDS = 50_000
#: PostgreSQL keeps positions 1–16383 and at most 256 positions per lexeme.
_PG_MAX_POS = 16383
_PG_MAX_POSITIONS = 256

#: An ASCII word longer than :data:`MAX_WORD`: FTS5 would index it whole, so such a span is
#: stored folded (its words cut to the limit) rather than as it is.
_LONG_ASCII_WORD = re.compile(f"[A-Za-z0-9]{{{MAX_WORD + 1},}}")


def fts5_body(text: str) -> str:
    """The indexed form of a span's ``text`` for SQLite's FTS5 (``ascii`` tokenizer): the
    text itself when it is ASCII and no word is over :data:`MAX_WORD` (the tokenizer then
    cuts and folds exactly as :func:`words` does), else its folded words joined by spaces —
    with a space after them in the rare case they would pass for the text itself
    (:func:`is_verbatim`)."""
    if text.isascii() and (len(text) <= MAX_WORD or _LONG_ASCII_WORD.search(text) is None):
        return text
    body = " ".join(folded_words(text))
    if is_verbatim(body, len(text.encode())):
        body += " "
    return body


def is_verbatim(body: str, size: int) -> bool:
    """Whether an FTS5 body (:func:`fts5_body`) is its span's text unchanged, the span being
    ``size`` bytes long: an ASCII body of exactly that length (a folded body is never one)."""
    return len(body) == size and body.isascii()


def tsvector_literal(folded: list[str]) -> str:
    """The indexed form for PostgreSQL: a ``tsvector`` literal with each word's positions
    (1-based, the phrase operator needs them), so no text-search parser or dictionary of the
    server decides what a word is."""
    positions: dict[str, list[int]] = {}
    for i, w in enumerate(folded[:MAX_WORDS], start=1):
        pos = positions.setdefault(w, [])
        if len(pos) < _PG_MAX_POSITIONS:
            pos.append(min(i, _PG_MAX_POS))
    parts = []
    for w, pos in positions.items():
        unique = sorted(set(pos))
        parts.append(f"'{w}':{','.join(map(str, unique))}")
    return " ".join(parts)


def snippet(text: str, first: int | None, width: int = 240) -> str:
    """At most ``width`` characters of ``text`` around character offset ``first`` (the first
    match), ``…`` where it was cut; the whole text when it is short."""
    if len(text) <= width:
        return text
    at = first or 0
    lo = max(0, min(at - width // 3, len(text) - width))
    hi = lo + width
    return ("…" if lo > 0 else "") + text[lo:hi] + ("…" if hi < len(text) else "")
