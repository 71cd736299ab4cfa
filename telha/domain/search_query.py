"""Search queries and quotes, pure (docs/rest-api.md, "Search"): a user's query parsed into
terms, each engine's query built from them (never from the user's raw syntax), the byte
ranges of the matched words in a span's text, and a quote's occurrences in a span.

Query syntax: words (all must occur: AND), ``"a phrase"`` (its words in a row), ``term*``
(words starting with ``term``; ``"a phr"*`` for a phrase whose last word is a prefix).
Punctuation inside a word splits it into a phrase (``e-mail`` is the phrase ``e mail``); a
CJK run is a phrase of its characters. Parentheses are separators but must balance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from telha.domain.canonical import normalize_canonical
from telha.domain.errors import RequestError
from telha.domain.folding import (
    MAX_WORD,
    Word,
    aligned_fold,
    fold_stream,
    is_cjk_unit,
    stream_fold,
    word_spans,
    words,
)

__all__ = [
    "MAX_INDEXED_SCOPE",
    "MAX_QUERY_BYTES",
    "MAX_QUOTE_BYTES",
    "SCOPE_ROWID_BITS",
    "Quote",
    "Term",
    "find_quote",
    "fts5_query",
    "fts5_trigrams",
    "like_pattern",
    "match_places",
    "match_ranges",
    "parse_query",
    "parse_quote",
    "quote_fragment",
    "quote_terms",
    "scope_rowids",
    "tsquery",
]

#: Longest ``q`` accepted (UTF-8 bytes).
MAX_QUERY_BYTES = 1000
#: Longest ``text`` of a locate accepted (UTF-8 bytes).
MAX_QUOTE_BYTES = 10_000

#: A query's pieces: a quoted phrase (with its ``*``), a parenthesis, a bare word, a lone ``"``.
_PIECE = re.compile(r'"[^"]*"\*?|[()]|[^\s"()]+|"')


@dataclass(frozen=True, slots=True)
class Term:
    """One term of a query: its folded words in a row (one word, or a phrase) and whether
    the last one is a prefix."""

    words: tuple[str, ...]
    prefix: bool = False


def _bare(raw: str) -> Term | None:
    """A bare word of the query (``term`` or ``term*``) as a term, ``None`` when it holds no
    word (``--``).

    :raises RequestError: a ``*`` elsewhere than at its end, or after no word.
    """
    prefix = raw.endswith("*")
    body = raw[:-1] if prefix else raw
    if "*" in body:
        raise RequestError("q: '*' may only end a word (prefix search: term*)")
    found = tuple(w for w, _, _ in words(body))
    if not found:
        if prefix:
            raise RequestError("q: '*' must follow a word (prefix search: term*)")
        return None
    return Term(found, prefix)


def _phrase(piece: str) -> Term | None:
    """A quoted phrase (``"a b"`` or ``"a b"*``) as a term, ``None`` when it holds no word.

    :raises RequestError: ``""*``.
    """
    prefix = piece.endswith("*")
    found = tuple(w for w, _, _ in words(piece[1 : -2 if prefix else -1]))
    if not found:
        if prefix:
            raise RequestError("q: '*' must follow a word (prefix search: term*)")
        return None
    return Term(found, prefix)


def parse_query(q: str) -> list[Term]:
    """The terms of ``q`` (see the module docstring), all of which a hit must match.

    :raises RequestError: ``q`` empty, longer than :data:`MAX_QUERY_BYTES`, with an
        unbalanced ``"`` or parenthesis, a ``*`` not ending a word, or no word at all.
    """
    if not q.strip():
        raise RequestError("q: must not be empty")
    if len(q.encode()) > MAX_QUERY_BYTES:
        raise RequestError(f"q: longer than {MAX_QUERY_BYTES} bytes")
    terms: list[Term] = []
    depth = 0
    for m in _PIECE.finditer(q):
        piece = m.group()
        if piece == '"':
            raise RequestError('q: unbalanced quotes (a phrase needs its closing ")')
        if piece in "()":
            depth += 1 if piece == "(" else -1
            if depth < 0:
                raise RequestError("q: unbalanced parenthesis (')' without '(')")
            continue
        term = _phrase(piece) if piece.startswith('"') else _bare(piece)
        if term is not None:
            terms.append(term)
    if depth:
        raise RequestError("q: unbalanced parenthesis ('(' without ')')")
    if not terms:
        raise RequestError("q: holds no word to search for")
    return terms


#: A scope's index rows take rowids in ``[scope_id << SCOPE_ROWID_BITS, (scope_id + 1) <<
#: SCOPE_ROWID_BITS)`` on SQLite (:func:`scope_rowids`): 2^40 rows a scope.
SCOPE_ROWID_BITS = 40
#: The largest scope id with a range (``hi`` must fit SQLite's signed 64-bit rowid).
MAX_INDEXED_SCOPE = (1 << (63 - SCOPE_ROWID_BITS)) - 2


def scope_rowids(scope_id: int) -> tuple[int, int]:
    """``[lo, hi)``: the rowids of scope ``scope_id``'s full-text index rows on SQLite.
    A search names this range rather than matching a scope token: FTS5 seeks its doclists
    to it and returns only the scope's rows, and ``bm25`` counts no scope-wide phrase (its
    statistics, rows holding a word and mean length, are still the whole index's:
    docs/architecture.md, "Search"). The range is filled from ``hi`` down, so the rows
    indexed last hold the lowest rowids: FTS5 reads a doclist in rowid order at its
    cheapest, and the rank window takes a query's newest matches first.

    :raises ValueError: ``scope_id`` is over :data:`MAX_INDEXED_SCOPE`.
    """
    if not 0 <= scope_id <= MAX_INDEXED_SCOPE:
        raise ValueError(f"scope {scope_id} has no full-text index range")
    return scope_id << SCOPE_ROWID_BITS, (scope_id + 1) << SCOPE_ROWID_BITS


def fts5_query(terms: list[Term]) -> str:
    """SQLite FTS5's MATCH expression for ``terms`` (every word quoted: a folded word holds
    no ``"``, so no user syntax reaches the engine); the scope is a rowid range
    (:func:`scope_rowids`)."""
    parts = [f'"{" ".join(t.words)}"' + (" *" if t.prefix else "") for t in terms]
    return " AND ".join(parts)


def tsquery(terms: list[Term]) -> str:
    """PostgreSQL's ``tsquery`` literal for ``terms``: quoted lexemes, ``<->`` between the
    words of a phrase, ``:*`` on a prefix, ``&`` between terms."""
    parts = []
    for t in terms:
        lexemes = [f"'{w}'" for w in t.words]
        if t.prefix:
            lexemes[-1] += ":*"
        parts.append("(" + " <-> ".join(lexemes) + ")")
    return " & ".join(parts)


def match_ranges(text: str, terms: list[Term]) -> list[tuple[int, int]]:
    """Byte ranges ``[start, end)`` relative to ``text`` (a span's canonical text) of every
    occurrence of a term: a word, or a phrase from its first word's start to its last word's
    end; sorted, duplicates removed."""
    return [(a, b) for a, b, _ in match_places(text, terms)]


def match_places(text: str, terms: list[Term]) -> list[tuple[int, int, int]]:
    """:func:`match_ranges` with each range's start as a character offset too:
    ``(start byte, end byte, start character)``."""
    whole = aligned_fold(text)
    if whole is not None and all(len(w) < MAX_WORD for t in terms for w in t.words):
        ranges = _found_in_whole(whole, terms)
    else:
        ranges = _found_in_words(text, terms)
    if not ranges:
        return []
    if text.isascii():
        return [(lo, hi, lo) for lo, hi in sorted(ranges)]
    byte_at = _ByteOffsets(text)
    points = sorted({p for r in ranges for p in r})
    at = {p: byte_at(p) for p in points}
    return [(at[lo], at[hi], lo) for lo, hi in sorted(ranges)]


@lru_cache(maxsize=1024)
def _term_pattern(term: Term) -> re.Pattern[str]:
    """``term`` as a pattern over a text folded character for character (:func:`aligned_fold`):
    its words (the last one or a longer word it starts, for a prefix) with a gap of non-word
    characters between them, at word boundaries — the runs of ``[^\\W_]`` being that text's
    words (its words are never cut at :data:`MAX_WORD` here: the caller keeps terms of
    shorter words)."""
    body = r"[\W_]+".join(map(re.escape, term.words)) + (r"[^\W_]*" if term.prefix else "")
    return re.compile(rf"(?<![^\W_]){body}(?![^\W_])")


def _found_in_whole(whole: str, terms: list[Term]) -> set[tuple[int, int]]:
    """The character ranges of every occurrence of ``terms`` in ``whole``, a text folded
    character for character: each term's pattern searched from every start (overlapping
    phrases included: ``a a`` twice in ``a a a``)."""
    ranges: set[tuple[int, int]] = set()
    for t in terms:
        pattern = _term_pattern(t)
        m = pattern.search(whole)
        while m is not None:
            ranges.add(m.span())
            m = pattern.search(whole, m.start() + 1)
    return ranges


def _found_in_words(text: str, terms: list[Term]) -> set[tuple[int, int]]:
    """The character ranges of every occurrence of ``terms`` in ``text``, by its folded
    words (:func:`~telha.domain.folding.word_spans`)."""
    folded, spans = word_spans(text)
    ranges: set[tuple[int, int]] = set()
    n = len(folded)
    for t in terms:
        first, k = t.words[0], len(t.words)
        head, last = list(t.words[:-1]), t.words[-1]
        for i in [i for i, w in enumerate(folded) if w == first or (k == 1 and t.prefix)]:
            if i + k > n or (k > 1 and folded[i : i + k - 1] != head):
                continue
            w = folded[i + k - 1]
            if w == last or (t.prefix and w.startswith(last)):
                ranges.add((spans[i][0], spans[i + k - 1][1]))
    return ranges


@dataclass(frozen=True, slots=True)
class Quote:
    """A quote to locate: ``text`` normalised like canonical text (NFC, LF) and stripped;
    ``folded``, its folding as a whole (:func:`telha.domain.folding.fold_stream`: clusters
    folded, whitespace runs one space); ``words``, its words as written (each ``(folded,
    start, end)``)."""

    text: str
    folded: str
    words: tuple[Word, ...]


def parse_quote(text: str) -> Quote:
    """The quote of ``POST /v1/locate``.

    :raises RequestError: empty (or only whitespace), or longer than
        :data:`MAX_QUOTE_BYTES`, or holding no word (the index finds candidates by words).
    """
    if len(text.encode()) > MAX_QUOTE_BYTES:
        raise RequestError(f"text: longer than {MAX_QUOTE_BYTES} bytes")
    norm = normalize_canonical(text).strip()
    if not norm:
        raise RequestError("text: must not be empty")
    found = tuple(words(norm))
    if not found:
        raise RequestError("text: holds no word to locate")
    folded = fold_stream(norm)[0].strip()
    return Quote(norm, folded, found)


def quote_terms(quote: Quote) -> list[Term]:
    """The index query that finds every span row that may hold ``quote``, starting or ending
    inside a word or not: the quote's whole words in a row — less its first word when that
    may be the end of a longer one, and its last when that may be the start of one (a word
    not a lone CJK character) — matched exactly; when that leaves none (a quote of one or
    two words), its last word as a prefix. A quote of one word that may lie inside a longer
    one is narrowed by :func:`quote_fragment` instead (docs/rest-api.md, "Locate a
    quote")."""
    found = list(quote.words)
    lo = 0 if is_cjk_unit(_written(quote, found[0])) else 1
    last_whole = is_cjk_unit(_written(quote, found[-1]))
    inner = found[lo : len(found) if last_whole else len(found) - 1]
    if inner:
        return [Term(tuple(w for w, _, _ in inner))]
    return [Term((found[-1][0],), not last_whole)]


def quote_fragment(quote: Quote) -> str | None:
    """The folded word to find *inside* the indexed words when ``quote`` is a single word
    that may start and end inside a longer one (``uffal`` in ``buffalo``, ``국어`` in
    ``한국어``): no whole word of the quote is known to be a word of the text, so the index's
    words cannot be asked for it exactly or as a prefix, and the candidates are the span rows
    whose indexed words contain it (the substring index, :func:`fts5_trigrams` and
    :func:`like_pattern`: docs/rest-api.md, "Locate a quote"). ``None`` for any other quote
    (:func:`quote_terms` narrows it)."""
    if len(quote.words) != 1 or is_cjk_unit(_written(quote, quote.words[0])):
        return None
    return quote.words[0][0]


#: Trigrams of a fragment a SQLite locate asks for at most (spread over the fragment).
MAX_TRIGRAMS = 12


def fts5_trigrams(fragment: str) -> str | None:
    """SQLite's MATCH expression on ``search_tri`` (FTS5 ``trigram``, ``detail = none``) for
    the rows whose text holds ``fragment`` (a folded word): its distinct trigrams, each
    quoted, joined by ``AND`` — every row holding the fragment, and some holding its
    trigrams apart, which the canonical text then rules out. At most :data:`MAX_TRIGRAMS`,
    the first, the last and some evenly between (fewer trigrams, a superset still).
    ``None`` when the fragment is shorter than 3 characters (code points): it has no
    trigram."""
    grams = list(dict.fromkeys(fragment[i : i + 3] for i in range(len(fragment) - 2)))
    if not grams:
        return None
    if len(grams) > MAX_TRIGRAMS:
        step = (len(grams) - 1) / (MAX_TRIGRAMS - 1)
        grams = [grams[round(i * step)] for i in range(MAX_TRIGRAMS)]
    return " AND ".join(f'"{g}"' for g in grams)


def like_pattern(fragment: str) -> str:
    """PostgreSQL's ``LIKE`` pattern matching a text that holds ``fragment`` anywhere (its
    ``\\``, ``%`` and ``_`` escaped; a folded word holds none, but no user text reaches the
    engine as syntax)."""
    escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _written(quote: Quote, word: Word) -> str:
    """The word as the quote writes it."""
    return quote.text[word[1] : word[2]]


def find_quote(text: str, quote: Quote) -> list[tuple[int, int, bool]]:
    """``(start, end, exact)`` byte ranges relative to ``text`` of every occurrence of
    ``quote``, overlapping ones included, compared folded (:func:`fold_stream`: case,
    accents, compatibility forms and ignorables folded, whitespace runs as one); a range
    covers whole grapheme clusters of ``text``. ``exact`` when its bytes equal the quote's."""
    if not quote.folded:
        return []
    byte_lo, byte_hi = _ByteOffsets(text), _ByteOffsets(text)
    out = []
    whole = stream_fold(text)
    pattern = _quote_pattern(quote.folded) if whole is not None else None
    if whole is not None and pattern is not None:
        # Folded character for character: the folded quote's characters are the text's at
        # the same offsets, its spaces the text's whitespace runs, whole.
        m = pattern.search(whole)
        while m is not None:
            lo, hi = m.span()
            out.append((byte_lo(lo), byte_hi(hi), text[lo:hi] == quote.text))
            m = pattern.search(whole, lo + 1)
        return sorted(set(out))
    folded, starts, ends = fold_stream(text)
    size = len(quote.folded)
    at = folded.find(quote.folded)
    while at >= 0:
        lo, hi = starts[at], ends[at + size - 1]
        out.append((byte_lo(lo), byte_hi(hi), text[lo:hi] == quote.text))
        at = folded.find(quote.folded, at + 1)
    return sorted(set(out))


_WHITESPACE = re.compile(r"\s")
#: A whitespace run of a text, whole: what one space of a folded quote stands for.
_RUN = r"(?<!\s)\s+(?!\s)"


@lru_cache(maxsize=256)
def _quote_pattern(folded: str) -> re.Pattern[str] | None:
    """A folded quote (:attr:`Quote.folded`) as a pattern over a text folded character for
    character (:func:`~telha.domain.folding.stream_fold`), where :func:`fold_stream` would
    have made each whitespace run one space: each of its spaces a whole whitespace run, the
    rest its characters. ``None`` when a piece between its spaces holds other whitespace
    (a character that folds to it; the general way compares it)."""
    pieces = folded.split(" ")
    if any(_WHITESPACE.search(p) for p in pieces):
        return None
    return re.compile(_RUN.join(map(re.escape, pieces)))


class _ByteOffsets:
    """UTF-8 byte offsets of non-decreasing character offsets of one text (each call encodes
    only the text since the previous one; a smaller offset starts over)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._char = 0
        self._byte = 0

    def __call__(self, i: int) -> int:
        if i < self._char:
            self._char = self._byte = 0
        self._byte += len(self._text[self._char : i].encode())
        self._char = i
        return self._byte
