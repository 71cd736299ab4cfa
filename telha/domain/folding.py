"""What "the same word" means, once for the full-text index, every query and every quote
(docs/architecture.md, "Words and folding"). Pure; both storage engines index what
this module cuts and folds, and every query and quote is cut and folded by it, so an indexed
word, a query word, a highlighted range and a located quote always agree.

**Words** are cut from the canonical text itself, so each carries its exact range there:

- a word is a run of letters, digits and combining marks (``\\p{L}``, ``\\p{N}``, ``\\p{M}``:
  an Indic vowel sign or virama, an Arabic mark, a combining accent stays inside its word);
  ignorable characters (:data:`IGNORABLES`: soft hyphen, zero-width space, non-joiner and
  joiner, word joiner, BOM) inside a word do not cut it;
- every Han, kana or Bopomofo character (with its marks, e.g. a half-width voiced mark) is a
  word of its own: Chinese and Japanese have no spaces, so a query's CJK run is searched as
  a phrase of single characters;
- a Hangul run is one word (Korean is spaced), and a word ends wherever the text changes
  between CJK, Hangul and any other script: ``APIキー`` is ``api`` ``キ`` ``ー``,
  ``iPhone用`` is ``iphone`` ``用``, ``API키`` is ``api`` ``키``.

**Folding** (:func:`fold`): ignorables dropped; then per extended grapheme cluster (UAX #29)
and concatenated, so a word folds to the concatenation of its clusters' foldings and a
quote's folded text maps back to whole clusters: NFKC (full-width ``ｔｅｌｈａ２０２６`` →
``telha2026``, ligatures ``ﬁ`` → ``fi``); full Unicode case folding (``str.casefold``: ``ß``
→ ``ss``, final ``ς`` → ``σ``); combining marks removed **only** from a Latin, Greek or
Cyrillic base (``é`` → ``e``, ``ά`` → ``α``, ``ё`` → ``е``, ``й`` → ``и``, ``İ`` → ``i``); a few
Latin letters that carry their stroke or dot inside them folded the same way (``ı`` ``đ``
``ł`` ``ø`` ``ħ`` ``ŧ``); Arabic harakat (short-vowel marks U+064B–U+0652) and the tatweel
dropped, hamza forms (``أ`` ``إ`` ``ؤ``) kept; everything else kept as it composes (NFC):
Hangul syllables, voiced kana, Indic vowel signs are never split. A folded word keeps only
letters, digits and marks, at most :data:`MAX_WORD` characters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from itertools import accumulate

import regex

__all__ = [
    "IGNORABLES",
    "MAX_WORD",
    "Word",
    "aligned_fold",
    "fold",
    "fold_cluster",
    "fold_stream",
    "folded_words",
    "is_cjk_unit",
    "stream_fold",
    "word_spans",
    "words",
]

#: Characters of a folded word kept (a longer word is cut: index and query alike).
MAX_WORD = 100
#: Default-ignorable characters dropped wherever text is folded (they never cut a word).
IGNORABLES = "\u00ad\u034f\u180e\u200b\u200c\u200d\u2060\ufeff"
_IGN_TABLE = dict.fromkeys(map(ord, IGNORABLES))
#: Latin letters whose mark is part of the letter (no decomposition): folded like accents.
_LETTERS = str.maketrans({"ı": "i", "đ": "d", "ł": "l", "ø": "o", "ħ": "h", "ŧ": "t"})
#: Arabic harakat and tatweel: optional in writing, so never part of what is compared.
_ARABIC_OPTIONAL = re.compile("[\u064b-\u0652\u0640]")

# Characters each a word of their own (Han, kana, Bopomofo; iteration and prolonged-sound
# marks, whose script is Common).
_CJK = (
    r"\p{Han}\p{Hiragana}\p{Katakana}\p{Bopomofo}"
    "\u3005-\u3007\u3021-\u3029\u3031-\u3035\u303b\u303c\u30fc\uff70\uff9e\uff9f"
)
_IGN = IGNORABLES
# A CJK character with its marks; a Hangul run; a run of any other letters, digits, marks.
_OTHER = rf"[[\p{{L}}\p{{N}}\p{{M}}]--[{_CJK}\p{{Hangul}}]]"
_WORD = regex.compile(
    rf"[{_CJK}][\p{{M}}\uff9e\uff9f]*"
    rf"|\p{{Hangul}}(?:[{_IGN}]*[\p{{Hangul}}\p{{M}}])*"
    rf"|{_OTHER}(?:[{_IGN}]*{_OTHER})*",
    regex.V1,
)
# Without CJK or Hangul a word is a run of letters, digits, marks and ignorables, less the
# ignorables at its edges (the same words as _WORD, found faster).
_RUN = regex.compile(rf"[\p{{L}}\p{{N}}\p{{M}}{_IGN}]+")
# Blocks holding every CJK and Hangul character (and a few others): text without any is cut
# by _RUN; a false alarm only costs the slower _WORD.
_MAYBE_CJK = re.compile(
    "[\u02ea\u02eb\u1100-\u11ff\u2e80-\u2fdf\u3000-\u9fff\ua960-\ua97f\uac00-\ud7ff"
    "\uf900-\ufaff\uff00-\uffef\U00016fe0-\U00016fff\U0001aff0-\U0001b2ff"
    "\U0001f200-\U0001f2ff\U00020000-\U0003ffff]"
)
# Code points with no mark, ignorable, CJK or Hangul among them, where the standard library's
# letters and digits (``[^\W_]``) are exactly ``\p{L}\p{N}\p{M}`` (checked for every code
# point by tests/unit/domain/test_folding.py): text of these alone is cut by the faster ``re``.
_PLAIN_BLOCKS = (
    "\x00-\u00ac\u00ae-\u02e9\u02ec-\u02ff\u0370-\u0482\u048a-\u058f\u1e00-\u1fff"
    "\u2010-\u205f\u2070-\u20cf\u2100-\u2bff"
)


def _agreeing(blocks: str) -> str:
    """``blocks`` (a character class body) less the code points where Python's Unicode
    database (``re``) and ``regex``'s own, often newer, one disagree about a word character
    (a letter assigned after Python's version): those go to the full rule, so the fast cut
    and the full rule agree whatever the two versions are."""
    in_blocks = re.compile(f"[{blocks}]")
    word = regex.compile(r"[\p{L}\p{N}\p{M}]")
    return _class(
        cp
        for cp in range(0x2C00)
        if in_blocks.match(chr(cp))
        and bool(_STDLIB_WORD.match(chr(cp))) == bool(word.match(chr(cp)))
    )


def _class(kept: Iterable[int]) -> str:
    """A character class body holding the code points ``kept`` (ascending)."""
    ranges: list[tuple[int, int]] = []
    for cp in kept:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


def _fold_whole(text: str) -> str:
    """A plain text (:func:`_is_plain`) folded as a whole: case folded, decomposed, every
    mark dropped, recomposed, the letters with a built-in stroke or dot folded."""
    whole = unicodedata.normalize("NFD", text.casefold())
    whole = unicodedata.normalize("NFC", _MARK.sub("", whole))
    return whole.translate(_LETTERS) if _HAS_LETTERS.search(whole) else whole


def _aligned(plain: str) -> str:
    """The code points of ``plain`` (a character class body) that :func:`_fold_whole` folds
    to exactly one code point that is a word character exactly when they are one (for
    ``re`` and ``regex`` alike): a text of these alone folds to a text of its own length,
    character for character, cut into words at the same places."""
    in_plain = re.compile(f"[{plain}]")
    word = regex.compile(r"[\p{L}\p{N}\p{M}]")
    kept = []
    for cp in range(0x2C00):
        c = chr(cp)
        if not in_plain.match(c):
            continue
        f = _fold_whole(c)
        is_word = bool(_STDLIB_WORD.match(c))
        if len(f) == 1 and bool(_STDLIB_WORD.match(f)) == is_word == bool(word.match(f)):
            kept.append(cp)
    return _class(kept)


_STDLIB_WORD = re.compile(r"[^\W_]")
_HAS_LETTERS = re.compile("[ıđłøħŧ]")
_PLAIN_WORD = re.compile(r"[^\W_]+")
_CJK_UNIT = regex.compile(rf"[{_CJK}][\p{{M}}\uff9e\uff9f]*", regex.V1)
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_ASCII_SPLIT = re.compile(r"([A-Za-z0-9]+)")
_PLAIN_SPLIT = re.compile(r"([^\W_]+)")
_CLUSTER = regex.compile(r"\X")
_MARKED_BASE = regex.compile(r"[\p{Latin}\p{Greek}\p{Cyrillic}]")
_MARK = regex.compile(r"\p{M}")
_NOT_WORD_CHAR = regex.compile(r"[^\p{L}\p{N}\p{M}]")
_SPACE = re.compile(r"\s+")


# The character classes below are computed on first use, not at import: passes over
# thousands of code points (~0.1 s or more) that a process never folding text (a ``telha``
# command) does not pay for.
@cache
def _plain_ranges() -> str:
    """:data:`_PLAIN_BLOCKS` less where ``re`` and ``regex`` disagree (:func:`_agreeing`)."""
    return _agreeing(_PLAIN_BLOCKS)


@cache
def _not_plain() -> re.Pattern[str]:
    """A code point outside the plain ranges."""
    return re.compile(f"[^{_plain_ranges()}]")


@cache
def _aligned_class() -> str:
    """Plain text folding character for character (see :func:`_aligned`): cut once, after
    folding."""
    return _aligned(_plain_ranges())


@cache
def _not_aligned() -> re.Pattern[str]:
    """A code point plain text does not fold character for character."""
    return re.compile(f"[^{_aligned_class()}]")


#: ``(folded word, start, end)``: the word's character offsets in the text it came from.
Word = tuple[str, int, int]


@lru_cache(maxsize=1 << 14)
def fold_cluster(cluster: str) -> str:
    """One extended grapheme cluster as it is compared (see the module docstring), before a
    word keeps only its letters, digits and marks; may be ``""`` (an ignorable)."""
    if cluster.isascii():
        return cluster.lower()
    s = unicodedata.normalize("NFKC", cluster.translate(_IGN_TABLE)).casefold()
    if not s.isascii():
        s = unicodedata.normalize("NFD", s)
        if _MARKED_BASE.match(s):
            s = _MARK.sub("", s)
        s = _ARABIC_OPTIONAL.sub("", s)
        s = unicodedata.normalize("NFC", s).translate(_LETTERS)
    return s


def _stream_aligned() -> str:
    """The code points of the aligned class (:func:`_aligned`) that :func:`fold_stream`
    folds as :func:`_fold_whole` does: whitespace folding to whitespace, any other character
    to the one :func:`fold_cluster` makes of it (``↚``, an arrow over a stroke, is aligned
    for the words but keeps its stroke in a quote's folding: not here)."""
    aligned = re.compile(f"[{_aligned_class()}]")
    kept = []
    for cp in range(0x2C00):
        c = chr(cp)
        if not aligned.match(c):
            continue
        f = _fold_whole(c)
        if c.isspace() == f.isspace() and (c.isspace() or fold_cluster.__wrapped__(c) == f):
            kept.append(cp)
    return _class(kept)


@cache
def _not_stream_aligned() -> re.Pattern[str]:
    """Plain text that :func:`fold_stream` does not fold character for character, as
    :func:`_fold_whole` does."""
    return re.compile(f"[^{_stream_aligned()}]")


@lru_cache(maxsize=1 << 16)
def fold(word: str) -> str:
    """``word`` (a word of :func:`words`) as it is compared: its clusters folded
    (:func:`fold_cluster`), only letters, digits and marks kept, at most :data:`MAX_WORD`
    characters; may be ``""`` (nothing left)."""
    if word.isascii():
        return word.lower()[:MAX_WORD]
    folded = "".join(fold_cluster(c) for c in _CLUSTER.findall(word.translate(_IGN_TABLE)))
    kept: str = _NOT_WORD_CHAR.sub("", folded)
    return kept[:MAX_WORD]


def words(text: str) -> list[Word]:
    """The words of ``text`` in order, each ``(folded, start, end)`` with character offsets
    (Python ``str`` indices) of the whole word as written; words folding to nothing are
    left out."""
    if text.isascii():
        found = _ASCII_WORD.finditer(text)
        return [(m.group().lower()[:MAX_WORD], m.start(), m.end()) for m in found]
    out: list[Word] = []
    if _not_plain().search(text) is None:
        for m in _PLAIN_WORD.finditer(text):
            f = fold(m.group())
            if f:
                out.append((f, m.start(), m.end()))
        return out
    if _MAYBE_CJK.search(text):
        for m in _WORD.finditer(text):
            f = fold(m.group())
            if f:
                out.append((f, m.start(), m.end()))
        return out
    for m in _RUN.finditer(text):
        word, start, end = m.group(), m.start(), m.end()
        if word[0] in IGNORABLES or word[-1] in IGNORABLES:
            trimmed = word.strip(IGNORABLES)
            start += len(word) - len(word.lstrip(IGNORABLES))
            end = start + len(trimmed)
            word = trimmed
        f = fold(word) if word else ""
        if f:
            out.append((f, start, end))
    return out


def folded_words(text: str) -> list[str]:
    """The folded words of ``text`` without their offsets: ``[w for w, _, _ in words(text)]``,
    found faster for the usual text of Latin, Greek and Cyrillic letters (the index's writer
    calls it for every span). Such text, already NFKC and holding no mark, ignorable, CJK or
    Hangul, is folded as a whole — case folded, decomposed, the marks that decomposing
    produced dropped (they are all on Latin, Greek or Cyrillic letters, or on symbols that
    are no part of a word), recomposed — and cut after; any other text word by word."""
    if not text.isascii() and _is_plain(text):
        return _fold_plain(text)
    return [w for w, _, _ in words(text)]


def _is_plain(text: str) -> bool:
    """Whether ``text`` is already NFKC and holds only code points of the plain ranges (no
    mark, ignorable, CJK or Hangul): folded as a whole by :func:`_fold_plain`."""
    return _not_plain().search(text) is None and unicodedata.is_normalized("NFKC", text)


def _fold_plain(text: str) -> list[str]:
    """The folded words of a plain text (:func:`_is_plain`), folded as a whole."""
    whole = _fold_whole(text)
    cut = _ASCII_WORD if whole.isascii() else _PLAIN_WORD  # the same words, found faster
    return [w[:MAX_WORD] for w in cut.findall(whole)]


def aligned_fold(text: str) -> str | None:
    """``text`` folded character for character, when it folds so: ASCII text, or text of
    the plain ranges, already NFKC, whose every character folds to one character that is a
    word character exactly when it is one (:func:`_aligned`); ``None`` for any other text.

    The result has ``text``'s length, and its character ``i`` is what :func:`fold_cluster`
    makes of ``text[i]`` (each such character is a grapheme cluster of its own): so its
    words (runs of ``[^\\W_]``, the standard library's ``re``) are the folded words of
    :func:`words` at the same offsets (tests/unit/domain/test_folding.py checks it for every code
    point): a search re-cuts every hit's text, this is the fast way for the usual text."""
    if text.isascii():
        return text.lower()
    if _not_aligned().search(text) is None and unicodedata.is_normalized("NFKC", text):
        return _fold_whole(text)
    return None


def stream_fold(text: str) -> str | None:
    """:func:`aligned_fold` of a text whose every character :func:`fold_stream` folds the
    same way (whitespace to whitespace, any other character as :func:`fold_cluster` does):
    then :func:`fold_stream` of ``text`` is the result with each whitespace run made one
    space (a leading run dropped), character for character, which a locate searches
    without building the stream; ``None`` for any other text."""
    if text.isascii():
        return text.lower()
    if _not_stream_aligned().search(text) is None and unicodedata.is_normalized("NFKC", text):
        return _fold_whole(text)
    return None


def word_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """:func:`words` as two lists, the folded words and their ``(start, end)`` character
    offsets, found faster for ASCII text and for the plain text :func:`folded_words` folds
    as a whole (the words are cut by the standard library's ``re`` and folded at once rather
    than one by one: a search cuts every hit's text again to find its matched words)."""
    whole = aligned_fold(text)
    if whole is not None:
        # Folded character for character: the words of the folding are the text's words,
        # at the same offsets.
        # Split keeping the words: [gap, word, gap, …, word, gap]; its running lengths are
        # every word's start and end (no match object per word).
        parts = (_ASCII_SPLIT if whole.isascii() else _PLAIN_SPLIT).split(whole)
        folded = parts[1::2]
        if any(len(w) > MAX_WORD for w in folded):
            folded = [w[:MAX_WORD] for w in folded]
        at = list(accumulate(map(len, parts)))
        return folded, list(zip(at[0:-1:2], at[1::2], strict=True))
    if _is_plain(text):
        folded = _fold_plain(text)
        spans = [m.span() for m in _PLAIN_WORD.finditer(text)]
        # The i-th folded word is the i-th word cut unless a word folded to nothing.
        if len(spans) == len(folded):
            return folded, spans
    found = words(text)
    return [w for w, _, _ in found], [(a, b) for _, a, b in found]


def is_cjk_unit(word: str) -> bool:
    """Whether ``word`` (as written) is one CJK character with its marks: a word that
    cannot start or end inside a longer one."""
    return _CJK_UNIT.fullmatch(word) is not None


def fold_stream(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` folded as a whole for finding a quote in it (docs/rest-api.md, "Locate a
    quote"): each cluster folded (:func:`fold_cluster`), each whitespace run one space.
    Returns the folded string and, for each of its characters, the character offsets in
    ``text`` where the cluster it came from starts and ends (``starts``, ``ends``): a match
    ``[i, j)`` of the folded string covers ``text[starts[i] : ends[j - 1]]``, whole clusters,
    never part of one."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for m in _SPACE.finditer(text):
        _fold_run(text, pos, m.start(), out, starts, ends)
        if out and out[-1] != " ":
            out.append(" ")
            starts.append(m.start())
            ends.append(m.end())
        pos = m.end()
    _fold_run(text, pos, len(text), out, starts, ends)
    return "".join(out), starts, ends


def _fold_run(
    text: str, lo: int, hi: int, out: list[str], starts: list[int], ends: list[int]
) -> None:
    """Append the folding of ``text[lo:hi]`` (no whitespace in it) cluster by cluster."""
    if lo >= hi:
        return
    run = text[lo:hi]
    if run.isascii():
        out.extend(run.lower())
        starts.extend(range(lo, hi))
        ends.extend(range(lo + 1, hi + 1))
        return
    # Clusters of the text without its ignorables (a soft hyphen between a letter and its
    # mark does not part them, as in fold), each mapped back to where it is in the text.
    keep = [i for i, c in enumerate(run) if c not in IGNORABLES]
    visible = "".join(run[i] for i in keep)
    for m in _CLUSTER.finditer(visible):
        folded = fold_cluster(m.group())
        out.extend(folded)
        starts.extend([lo + keep[m.start()]] * len(folded))
        ends.extend([lo + keep[m.end() - 1] + 1] * len(folded))
