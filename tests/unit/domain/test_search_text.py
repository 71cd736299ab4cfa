"""Words, queries and quotes of full-text search (:mod:`telha.domain.search_text`,
:mod:`telha.domain.search_query`): folding, CJK characters as words, the engines' query
strings built from quoted words only, match ranges that slice the UTF-8 bytes to the matched
words (a property over generated text), quotes found with whitespace runs as one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telha.domain.errors import RequestError
from telha.domain.search_query import (
    MAX_INDEXED_SCOPE,
    Term,
    find_quote,
    fts5_query,
    match_ranges,
    parse_query,
    parse_quote,
    scope_rowids,
    tsquery,
)
from telha.domain.search_text import fold, fts5_body, tsvector_literal, words


def test_folding_drops_case_accents_and_compatibility_forms() -> None:
    assert fold("Relatório") == fold("RELATORIO") == "relatorio"
    assert fold("ÉSIO") == "esio" and fold("São") == "sao"


def test_cjk_characters_are_words_of_their_own() -> None:
    found = words("東京都に住む Tokyo-to")
    assert [w for w, _, _ in found] == ["東", "京", "都", "に", "住", "む", "tokyo", "to"]
    assert found[6][1:] == (7, 12)


def test_index_forms() -> None:
    assert fts5_body("Plain text.") == "Plain text."
    assert fts5_body("Tokyo 東京都に.") == "tokyo 東 京 都 に"
    assert tsvector_literal(["a", "b", "a"]) == "'a':1,3 'b':2"


def test_queries_reach_the_engines_as_quoted_words_only() -> None:
    terms = parse_query('alpha "Beta  gamma" délt* OR NEAR')
    assert terms == [
        Term(("alpha",)),
        Term(("beta", "gamma")),
        Term(("delt",), True),
        Term(("or",)),
        Term(("near",)),
    ]
    assert fts5_query(terms) == '"alpha" AND "beta gamma" AND "delt" * AND "or" AND "near"'
    assert scope_rowids(7) == (7 << 40, 8 << 40)
    assert scope_rowids(MAX_INDEXED_SCOPE)[1] < 2**63  # fits SQLite's rowid
    with pytest.raises(ValueError):
        scope_rowids(MAX_INDEXED_SCOPE + 1)
    assert tsquery(terms[:3]) == "('alpha') & ('beta' <-> 'gamma') & ('delt':*)"


@pytest.mark.parametrize(
    ("q", "reason"),
    [
        ("", "empty"),
        ("x" * 1001, "longer"),
        ('"open', "quotes"),
        ("*", "'*'"),
        ("a*b", "'*'"),
        ('""*', "'*'"),
        ("NEAR(", "parenthesis"),
        ("a)", "parenthesis"),
        ("-- ++", "no word"),
    ],
)
def test_bad_queries_say_why(q: str, reason: str) -> None:
    with pytest.raises(RequestError, match=reason):
        parse_query(q)


def test_matches_are_byte_ranges_of_words_and_phrases() -> None:
    text = "Olá, relatório! O relatório anual — 東京都."
    raw = text.encode()
    found = match_ranges(text, parse_query('relatorio "o relatorio" 京都'))
    assert [raw[a:b].decode() for a, b in found] == [
        "relatório",
        "O relatório",
        "relatório",
        "京都",
    ]


_TEXT = st.text(alphabet=st.sampled_from(list("abcÁéíõüß ,.-\n東京都に")), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(text=_TEXT, pick=st.integers(min_value=0))
def test_every_match_slices_to_a_word_folding_to_the_term(text: str, pick: int) -> None:
    found = words(text)
    if not found:
        return
    term = found[pick % len(found)][0]
    raw = text.encode()
    ranges = match_ranges(text, [Term((term,))])
    assert ranges
    for a, b in ranges:
        assert fold(raw[a:b].decode()) == term
    assert len(ranges) == sum(1 for w, _, _ in found if w == term)


def test_quotes_match_whitespace_runs_and_say_exact() -> None:
    quote = parse_quote("Hello \r\n  world.")
    assert quote.text == "Hello \n  world."
    text = "x Hello world. Hello \n  world."
    assert find_quote(text, quote) == [(2, 14, False), (15, 30, True)]
    with pytest.raises(RequestError, match="empty"):
        parse_quote(" \n ")
    with pytest.raises(RequestError, match="no word"):
        parse_quote("--")
