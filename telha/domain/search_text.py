"""Words of canonical text for full-text search and quote location (docs/architecture.md,
"Search"): pure, shared by the index writer, the query parser and the match finder, so an
indexed word, a query word and a highlighted range are always cut and folded alike.

- A **word** is a run of letters and digits (Python's ``\\w`` without ``_``), except that
  every Han, kana or CJK-symbol character is a word of its own: Japanese and Chinese have no
  spaces, so a query's CJK run is searched as a phrase of single characters.
- A word is **folded** for comparison: lower-cased, decomposed (NFD) and its combining
  marks dropped (``Relatório`` → ``relatorio``), at most :data:`MAX_WORD` characters — the
  folding of SQLite FTS5's ``unicode61 remove_diacritics 2`` tokenizer, which indexes the
  text there (so a folded query word is what FTS5 indexed; PostgreSQL indexes these words
  themselves).
- Offsets are UTF-8 **byte** offsets into the canonical text, like every offset of the API.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = [
    "MAX_WORD",
    "MAX_WORDS",
    "Word",
    "fold",
    "fts5_body",
    "is_verbatim",
    "snippet",
    "tsvector_literal",
    "words",
]

#: Characters of a folded word kept (a longer word is cut: index and query alike).
MAX_WORD = 100
#: Words of one span PostgreSQL indexes (the rest of a larger span is not searchable there:
#: a ``tsvector`` holds at most 1 MiB).
MAX_WORDS = 50_000
#: PostgreSQL keeps positions 1–16383 and at most 256 positions per lexeme.
_PG_MAX_POS = 16383
_PG_MAX_POSITIONS = 256

_CJK = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3040-\u309f\u30a0-\u30ff\u3100-\u312f"
    "\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_WORD = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")

#: ``(folded word, start, end)``: the word's character offsets in the text it came from.
Word = tuple[str, int, int]


@lru_cache(maxsize=1 << 16)
def fold(word: str) -> str:
    """``word`` as it is compared (see the module docstring); may be ``""`` (nothing left)."""
    if word.isascii():
        return word.lower()[:MAX_WORD]
    folded = unicodedata.normalize("NFD", word.lower())
    return "".join(c for c in folded if not unicodedata.combining(c))[:MAX_WORD]


def words(text: str) -> list[Word]:
    """The words of ``text`` in order, each ``(folded, start, end)`` with character offsets
    (Python ``str`` indices); words folding to nothing are left out."""
    out: list[Word] = []
    for m in _WORD.finditer(text):
        f = fold(m.group())
        if f:
            out.append((f, m.start(), m.end()))
    return out


def fts5_body(text: str) -> str:
    """The indexed form for SQLite's FTS5 (``unicode61 remove_diacritics 2``, which cuts and
    folds words as :func:`words` does): the text itself, with a space after each CJK
    character so that each is a word of its own (FTS5 would take a run of them as one)."""
    if text.isascii() or _CJK_CHAR.search(text) is None:
        return text
    return _CJK_CHAR.sub(lambda m: m.group() + " ", text)


def is_verbatim(body: str) -> bool:
    """Whether an FTS5 body (:func:`fts5_body`) is its span's text unchanged (it holds no
    CJK character, so no space was put in)."""
    return body.isascii() or _CJK_CHAR.search(body) is None


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
