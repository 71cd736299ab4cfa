"""A one-word locate through the substring index (docs/rest-api.md, "Locate a quote"), on
both engines: a fragment inside a longer word is found in Latin, Korean, Japanese with Latin,
Russian and Greek text, by its own spelling and folded, overlapping occurrences included;
a fragment of 1 or 2 characters (no trigram: a scan of the scope) too; and a superseded
version's words leave the substring index with its rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from telha.domain.ids import content_hash
from telha.domain.model import Dedup, NewVersion
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.domain.search_query import parse_quote
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx
from tests.integration.test_search_queue import SCOPE
from tests.support.pg import ENGINES
from tests.support.stores import fresh_store

pytestmark = pytest.mark.anyio

WORDS = [
    "Buffalo", "bananas", "aaaaa", "한국어를", "대한민국", "iPhone用", "データベース",
    "Русский", "Ελληνικά", "filler", "другой",
]  # fmt: skip
SOURCE = b"q" * 16


async def _commit(store: StorageEngine, words: list[str], source: bytes) -> None:
    """A version of ``source`` whose text is ``words`` one a line, a span row each (byte
    offsets)."""
    text = "".join(f"{w}\n" for w in words).encode()
    spans, nodes, at = [], [], 0
    for i, w in enumerate(words):
        size = len(w.encode())
        spans.append(SpanOut(at, at + size, "body"))
        nodes.append(NodeOut(("PARAGRAPH",), msgspec.json.encode({"i": i}), (i,)))
        at += size + 1
    version = NewVersion(source, "w.txt", "text", content_hash(text), len(text), "w", None)
    out = await store.versions.commit(
        SCOPE, version, Projection(text, spans, nodes, []), dedup=Dedup.NONE, completion=None
    )
    assert out.source_version_tx is not None


@pytest.fixture(params=ENGINES)
async def indexed(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageEngine]:
    """A fresh store of each engine that keeps the full-text index, holding :data:`WORDS`
    (one span row each, on its own line)."""
    async with fresh_store(str(request.param), tmp_path, search=True) as opened:
        await _commit(opened, WORDS, source=SOURCE)
        yield opened


def _at(word: str, inner: str, nth: int = 0) -> tuple[int, int]:
    """Byte range of the ``nth`` occurrence of ``inner`` in ``word`` of :data:`WORDS`."""
    text = "".join(f"{w}\n" for w in WORDS)
    base = text.index(f"{word}\n")
    at = -1
    for _ in range(nth + 1):
        at = word.index(inner, at + 1)
    lo = len(text[: base + at].encode())
    return lo, lo + len(inner.encode())


async def _found(store: StorageEngine, quote: str) -> list[tuple[int, int, bool]]:
    found = await store.search.locate(SCOPE, parse_quote(quote), source_id=None, limit=50)
    assert all(f.source_id == SOURCE for f in found)
    return [(f.start, f.end, f.exact) for f in found]


@pytest.mark.parametrize(
    ("quote", "word", "inner"),
    [
        ("uffal", "Buffalo", "uffal"),  # Latin, lower case inside a capitalised word
        ("국어를", "한국어를", "국어를"),  # Korean: the end of a Hangul run
        ("한민국", "대한민국", "한민국"),  # and its middle
        ("Phon", "iPhone用", "Phon"),  # Japanese with Latin: inside the Latin word
        ("ータベー", "データベース", "ータベー"),  # kana: a phrase of single characters
        ("усски", "Русский", "усски"),  # Russian
        ("ληνικά", "Ελληνικά", "ληνικά"),  # Greek, with its accent
    ],
)
async def test_a_fragment_inside_a_word_is_found_exactly(
    indexed: StorageEngine, quote: str, word: str, inner: str
) -> None:
    assert await _found(indexed, quote) == [(*_at(word, inner), True)]


@pytest.mark.parametrize(
    ("quote", "word", "inner"),
    [
        ("FFALO", "Buffalo", "ffalo"),  # another case
        ("усский", "Русский", "усский"),  # й folds to и: the quote's й matches after folding
        ("ΛΗΝΙΚΑ", "Ελληνικά", "ληνικά"),  # upper case, without the accent
        ("ｐｈｏｎ", "iPhone用", "Phon"),  # full-width letters
    ],
)
async def test_a_fragment_is_found_folded(
    indexed: StorageEngine, quote: str, word: str, inner: str
) -> None:
    found = await _found(indexed, quote)
    assert found == [(*_at(word, inner), inner == quote)]


async def test_overlapping_occurrences_are_each_found(indexed: StorageEngine) -> None:
    assert await _found(indexed, "ana") == [
        (*_at("bananas", "ana", 0), True), (*_at("bananas", "ana", 1), True),
    ]  # fmt: skip
    assert await _found(indexed, "aaa") == [(*_at("aaaaa", "aaa", i), True) for i in range(3)]


@pytest.mark.parametrize(
    ("quote", "places"),
    [
        ("국어", [("한국어를", "국어")]),  # 2 characters: no trigram
        ("ff", [("Buffalo", "ff")]),
        ("ф", []),
        ("ий", [("Русский", "ий")]),  # й folds to и: "ии" is found where "ий" is
        ("Λ", [("Ελληνικά", "λ", 0), ("Ελληνικά", "λ", 1)]),
    ],
)
async def test_a_fragment_shorter_than_a_trigram_is_found(
    indexed: StorageEngine, quote: str, places: list[tuple[str, ...]]
) -> None:
    found = await _found(indexed, quote)
    want = [_at(w, i, int(n[0]) if n else 0) for w, i, *n in places]  # type: ignore[call-overload]
    assert [(a, b) for a, b, _ in found] == want


async def test_a_fragment_absent_or_scattered_is_not_found(indexed: StorageEngine) -> None:
    # Every trigram of `ngu` is in no word, of `anan`'s… `nan`, `ana` are: the canonical
    # text decides; `lobuf` holds trigrams of `Buffalo` in another order.
    for quote in ("ngu", "lobuf", "국어한", "ληνε"):
        assert await _found(indexed, quote) == [], quote


async def test_a_superseded_version_leaves_the_substring_index(indexed: StorageEngine) -> None:
    store = indexed
    assert await _found(store, "uffal")
    await _commit(store, ["other", "words"], source=SOURCE)
    assert await _found(store, "uffal") == []
    assert await _found(store, "국어를") == []
    assert await _found(store, "ther") == [(1, 5, True)]

    async def held(tx: Tx) -> int:
        if tx.dialect.name == "postgres":
            rows = await tx.fetchall("SELECT count(*) FROM search_spans WHERE words LIKE '%uffal%'")
        else:  # what the substring index itself answers, without the canonical text
            rows = await tx.fetchall(
                'SELECT count(*) FROM search_tri WHERE search_tri MATCH \'"uff" AND "fal"\''
            )
        return int(rows[0][0])

    assert await store.read(held) == 0  # type: ignore[attr-defined]
