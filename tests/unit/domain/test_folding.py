"""The one folding of full-text search (:mod:`telha.domain.folding`) across scripts: each
word of a text in Korean, Japanese (voiced kana, Latin against kana), Chinese, Russian,
Ukrainian, Greek, Arabic, Hindi, Turkish, German and Vietnamese is found by its own
spelling, upper and lower case and, where the convention allows, without its accents; a
word absent is not found; every match slices exactly the whole word (never part of a
grapheme); a quote is found inside words, overlapping, and after folding."""

from __future__ import annotations

import contextlib
import re

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from telha.domain import folding
from telha.domain.errors import RequestError
from telha.domain.folding import fold, fold_stream, words
from telha.domain.search_query import (
    Quote,
    Term,
    find_quote,
    fts5_query,
    match_ranges,
    parse_query,
    parse_quote,
    quote_fragment,
    quote_terms,
)
from telha.domain.search_text import fts5_body, is_verbatim
from tests.support.languages import LANGUAGES


def _found(text: str, q: str) -> list[str]:
    raw = text.encode()
    return [raw[a:b].decode() for a, b in match_ranges(text, parse_query(q))]


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_every_word_is_found_by_its_spellings_and_highlighted_whole(language: str) -> None:
    text, present, absent = LANGUAGES[language]
    for q, word in present:
        assert word in _found(text, q), (q, word)
        # The index holds the query's words as FTS5 and PostgreSQL see them.
        body = fts5_body(text).split()
        for term in parse_query(q):
            for w in term.words[: len(term.words) - int(term.prefix)]:
                assert w in body, (q, w)
    for q in absent:
        assert _found(text, q) == [], q


def test_marks_stay_in_their_word_and_script_changes_cut_words() -> None:
    assert [w for w, _, _ in words("हिन्दी")] == [fold("हिन्दी")]
    assert [w for w, _, _ in words("APIキー")] == ["api", "キ", "ー"]
    assert [w for w, _, _ in words("iPhone用")] == ["iphone", "用"]
    assert [w for w, _, _ in words("API키")] == ["api", "키"]
    assert fold("한국어") == "한국어"  # never split into jamo
    assert fold("デ") == "デ" and fold("ﾃﾞ") == "デ"  # voiced kana composed, not stripped
    assert fold("أحمد") != fold("احمد")  # hamza forms are letters


def test_ignorables_and_compatibility_forms() -> None:
    assert [w for w, _, _ in words("docu\u00adment zero\u200bwidth")] == ["document", "zerowidth"]
    assert [w for w, _, _ in words("ｔｅｌｈａ ２０２６ ﬁle")] == ["telha", "2026", "file"]
    text = "see docu\u00adment"
    assert _found(text, "document") == ["docu\u00adment"]
    assert _found("ｔｅｌｈａ ２０２６", "telha 2026") == ["ｔｅｌｈａ", "２０２６"]


def test_an_ascii_span_is_indexed_as_it_is_and_anything_else_folded() -> None:
    assert fts5_body("Plain text, v2.") == "Plain text, v2."
    assert is_verbatim("Plain text, v2.", 15)
    # A folded body never passes for the text itself, even with the same length.
    body = fts5_body("\ufb03")  # "ﬃ": 3 bytes, folds to "ffi"
    assert body.split() == ["ffi"] and not is_verbatim(body, 3)
    long = "x" * 150
    assert fts5_body(long) == "x" * 100


def test_locate_mid_word_overlapping_and_folded() -> None:
    text = "buffalo buffalo buffalo"
    assert find_quote(text, parse_quote("buffalo buffalo")) == [(0, 15, True), (8, 23, True)]
    assert find_quote(text, parse_quote("ffalo buf")) == [(2, 11, True), (10, 19, True)]
    assert find_quote(text, parse_quote("uff")) == [(1, 4, True), (9, 12, True), (17, 20, True)]
    # A ligature and a soft hyphen in the text; case differs: found, folded.
    page = "A \ufb01ne docu\u00adment."
    (found,) = find_quote(page, parse_quote("FINE DOCUMENT"))
    raw = page.encode()
    assert raw[found[0] : found[1]].decode() == "\ufb01ne docu\u00adment" and found[2] is False
    # A quote starting inside a ligature covers the whole ligature.
    (inside,) = find_quote(page, parse_quote("ine"))
    assert raw[inside[0] : inside[1]].decode() == "\ufb01ne"
    # Korean, Japanese, Hindi quotes, mid-word.
    assert find_quote("우리는 한국어", parse_quote("리는 한국")) == [(3, 16, True)]
    assert find_quote("このデータベース", parse_quote("データ")) == [(6, 15, True)]
    hindi = "हिन्दी भाषा"
    ((a, b, exact),) = find_quote(hindi, parse_quote("न्दी भा"))
    assert hindi.encode()[a:b].decode() == "न्दी भा" and exact


def test_locate_candidates_come_from_the_index_words() -> None:
    # The first word may end a longer one, the last may start one: the whole words between.
    (term,) = quote_terms(parse_quote("ffalo buffalo big buf"))
    assert term.words == ("buffalo", "big") and not term.prefix
    assert fts5_query([term]) == '"buffalo big"'
    # Nothing whole between them: the last word as a prefix (it starts a word).
    (two,) = quote_terms(parse_quote("ffalo buf"))
    assert two.words == ("buf",) and two.prefix
    (cjk,) = quote_terms(parse_quote("データ"))
    assert cjk.words == ("デ", "ー", "タ") and not cjk.prefix
    # One word that may lie inside a longer one: found inside the indexed words.
    assert quote_fragment(parse_quote("UFFAL")) == "uffal"
    assert quote_fragment(parse_quote("국어")) == "국어"
    assert quote_fragment(parse_quote("デ")) is None  # a lone CJK character is a whole word
    assert quote_fragment(parse_quote("ffalo buf")) is None
    (mixed,) = quote_terms(parse_quote("myAPIキー"))
    assert mixed.words == ("キ", "ー") and not mixed.prefix


_ALPHABET = [*"aéİıßﬁ ёй한국어デﾃﾞ中हिन्दी\u00ad-,\n", "\u0301"]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(_ALPHABET), min_size=1, max_size=40))
def test_matches_slice_whole_words_and_quotes_whole_clusters(text: str) -> None:
    raw = text.encode()
    found = words(text)
    starts = {len(text[:s].encode()) for _, s, _ in found}
    ends = {len(text[:e].encode()) for _, _, e in found}
    for w, _, _ in found:
        for a, b in match_ranges(text, parse_query(f'"{w}"')):
            assert a in starts and b in ends
            assert fold(raw[a:b].decode()) == w
    folded, s_at, e_at = fold_stream(text)
    assert len(folded) == len(s_at) == len(e_at)
    if text.strip() and found:
        for a, b, _ in find_quote(text, parse_quote(text)):
            assert raw[a:b].decode()  # whole UTF-8 characters


def test_the_plain_ranges_cut_words_as_the_full_rule_does() -> None:
    # Text of the plain ranges alone is cut by the standard library's re: for every code
    # point there, it must be a word character exactly when the full rule says so, and
    # never a mark, an ignorable, CJK or Hangul.
    plain = regex.compile(f"[{folding._plain_ranges()}]")
    word = regex.compile(r"[\p{L}\p{N}\p{M}]")
    for cp in range(0x3000):
        c = chr(cp)
        if plain.match(c):
            assert bool(re.match(r"[^\W_]", c)) == bool(word.match(c)), hex(cp)
            assert not regex.match(r"[\p{M}\p{Hangul}\p{Han}\p{Bopomofo}]", c), hex(cp)
            assert c not in folding.IGNORABLES, hex(cp)
    text = "Olá, São Paulo — Köln ² ½ x_y"
    assert folding.words(text) == [
        (folding.fold(m.group()), m.start(), m.end()) for m in folding._WORD.finditer(text)
    ]


_PLAIN = [*"aAéÉßİıœŒðÐøØçÇñÑüÜåÅæÆšŠžŽ", *"άΆέΈωΩςσΣϊΐ", *"ёЁйЙїЇґҐщЩ", *" ,.;-—'0123456789²"]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(_PLAIN), min_size=1, max_size=60))
def test_folded_words_of_plain_text_are_its_words_folded(text: str) -> None:
    assert folding.folded_words(text) == [w for w, _, _ in words(text)]


def _split(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    found = words(text)
    return [w for w, _, _ in found], [(a, b) for _, a, b in found]


#: Letters folding to more than one character, ignorables, compatibility forms, CJK, Hangul.
_ODD = [*"ǅᾀŉẞĳ\u00adﬁ한デ_ＡⅨ\u0301\u1fed"]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(_PLAIN + _ODD), min_size=1, max_size=60))
def test_word_spans_are_the_words(text: str) -> None:
    assert folding.word_spans(text) == _split(text)


def test_word_spans_agree_for_every_code_point() -> None:
    # The fast cut (a text folded whole, split once) must give words() for any character
    # alone, inside a word and after an accented letter.
    for cp in range(0x20, 0x2C00):
        c = chr(cp)
        for text in (c, f"a{c}b", f"é{c} x", f"Ω{c}"):
            assert folding.word_spans(text) == _split(text), (hex(cp), text)


def _ranges_word_by_word(text: str, terms: list[Term]) -> list[tuple[int, int]]:
    """The matched ranges as the words of :func:`words` give them, one by one."""
    found = words(text)
    out = set()
    for t in terms:
        k = len(t.words)
        for i in range(len(found) - k + 1):
            got = [w for w, _, _ in found[i : i + k]]
            if got[:-1] == list(t.words[:-1]) and (
                got[-1] == t.words[-1] or (t.prefix and got[-1].startswith(t.words[-1]))
            ):
                out.add((found[i][1], found[i + k - 1][2]))
    return [(len(text[:a].encode()), len(text[:b].encode())) for a, b in sorted(out)]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(_PLAIN + _ODD), min_size=1, max_size=60),
    q=st.sampled_from(["a", "e", "ss", "a*", '"a e"', "σ*", "ё и", "i", "fi", "ae", "9"]),
)
def test_match_ranges_are_the_words_matched(text: str, q: str) -> None:
    terms = parse_query(q)
    assert match_ranges(text, terms) == _ranges_word_by_word(text, terms)


def _quote_by_stream(text: str, quote: Quote) -> list[tuple[int, int, bool]]:
    """The occurrences of ``quote`` as :func:`fold_stream` of the whole text gives them (the
    general way, whatever the text)."""
    folded, starts, ends = fold_stream(text)
    out, size = set(), len(quote.folded)
    at = folded.find(quote.folded)
    while at >= 0:
        lo, hi = starts[at], ends[at + size - 1]
        out.add((len(text[:lo].encode()), len(text[:hi].encode()), text[lo:hi] == quote.text))
        at = folded.find(quote.folded, at + 1)
    return sorted(out)


def _quotes(*texts: str) -> list[Quote]:
    out = []
    for t in texts:
        with contextlib.suppress(RequestError):  # a text holding no word is no quote
            out.append(parse_quote(t))
    return out


_WHITESPACE = [*" \t\n\x0b\x0c\x1c\x1f\x85\xa0\u2002\u2028\u3000"]


def test_quotes_in_text_folded_character_for_character_agree_for_every_code_point() -> None:
    # A text folded character for character (aligned_fold) is searched without its folded
    # stream: every code point, alone, inside a word and beside whitespace, must give the
    # places the folded stream gives, for quotes cut from it and for quotes holding it.
    for cp in [*range(0x20, 0x2C00), *map(ord, _WHITESPACE)]:
        c = chr(cp)
        for text in (f"a{c}b", f"é{c}  x {c}", f"Ω {c}{c}b\t{c}"):
            for quote in _quotes(text, f"{c}b", f"a{c}", f"{c}", "b", f"x {c}", f"{c}{c}b"):
                assert find_quote(text, quote) == _quote_by_stream(text, quote), (hex(cp), text)


_SPACED = [*_PLAIN, *_ODD, *_WHITESPACE]


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(_SPACED), min_size=1, max_size=60),
    cut=st.tuples(st.integers(0, 60), st.integers(1, 12)),
    q=st.sampled_from(["ss", "a a", "é ё", "9 ,", "ae", "Σ", "ﬁ", "a\u00ada"]),
)
def test_find_quote_is_the_folded_streams(text: str, cut: tuple[int, int], q: str) -> None:
    # A quote cut from the text and a fixed one: the places of the fast way for text folded
    # character for character are the folded stream's, whatever the text.
    for quote in _quotes(text[cut[0] : cut[0] + cut[1]], q):
        assert find_quote(text, quote) == _quote_by_stream(text, quote)


def test_matches_in_text_folded_character_for_character_agree_for_every_code_point() -> None:
    # The matched words of a search are found by a pattern over such a text: for every code
    # point beside words and whitespace, the words' own matches.
    terms = [parse_query(q) for q in ("a", "b*", '"a b"', '"x a"*', "ab")]
    for cp in [*range(0x20, 0x2C00), *map(ord, _WHITESPACE)]:
        c = chr(cp)
        for text in (f"a{c}b", f"x a{c}a b {c}ab", f"a b{c}a b a"):
            for t in terms:
                assert match_ranges(text, t) == _ranges_word_by_word(text, t), (hex(cp), text)
