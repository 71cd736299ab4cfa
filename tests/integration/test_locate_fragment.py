"""A one-word locate's scan of the scope's index rows (docs/rest-api.md, "Locate a quote")
on both engines: its candidates are the rows whose *words* contain the fragment. On
PostgreSQL the index row is a ``tsvector`` whose text also holds each word's positions, so a
digit fragment must not take every row with such a position for a candidate (the first
``LOCATE_CANDIDATES`` of them crowded the true rows out)."""

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
from telha.storage.search.queries import LOCATE_CANDIDATES
from tests.integration.test_search_queue import SCOPE, _commit
from tests.support.pg import ENGINES
from tests.support.stores import fresh_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ENGINES)
async def indexed(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageEngine]:
    """A fresh store of each engine that keeps the full-text index."""
    async with fresh_store(str(request.param), tmp_path, search=True) as opened:
        yield opened


async def test_a_digit_fragment_is_found_past_rows_whose_positions_hold_it(
    indexed: StorageEngine,
) -> None:
    store = indexed
    # More one-word rows than the scan's candidates, each at word position 1, none holding a
    # "1"; then the one row that does, in another source indexed after them.
    await _commit(store, ["alpha"] * (LOCATE_CANDIDATES + 1), source=b"a" * 16)
    await _commit(store, ["code", "x1y"], source=b"b" * 16)
    found = await store.search.locate(SCOPE, parse_quote("1"), source_id=None, limit=10)
    assert [(f.source_id, f.start, f.end) for f in found] == [(b"b" * 16, 6, 7)]


def _nested(lines: list[str]) -> Projection:
    """A DOCUMENT node over the whole text and a PARAGRAPH node per line: every place of a
    line lies in two nested span rows."""
    text = "".join(f"{line}\n" for line in lines).encode()
    spans, nodes, at = [SpanOut(0, len(text) - 1, "body")], [], 0
    nodes.append(NodeOut(("DOCUMENT",), b"{}", (0,)))
    for i, line in enumerate(lines, start=1):
        spans.append(SpanOut(at, at + len(line.encode()), "body"))
        nodes.append(NodeOut(("PARAGRAPH",), msgspec.json.encode({"i": i}), (i,)))
        at += len(line.encode()) + 1
    return Projection(text, spans, nodes, [])


async def test_a_locate_with_a_limit_answers_the_first_places_of_the_whole_answer(
    indexed: StorageEngine,
) -> None:
    # Sources published (so indexed) in another order than their ids sort in, each place in
    # a paragraph and in the document around it: whatever the limit, the answer is the
    # first places of the whole answer by source, version and offset, each with the nodes
    # of both rows (the verification stops once those are known).
    store = indexed
    lines = ["buffalo Buffalo buffalo", "one büffalo", "no such word", "buffalos buffalo"]
    for source in (b"c" * 16, b"a" * 16, b"b" * 16):
        raw = "".join(f"{line}\n" for line in lines).encode()
        version = NewVersion(source, "n.txt", "text", content_hash(raw), len(raw), "w", None)
        await store.versions.commit(
            SCOPE, version, _nested(lines), dedup=Dedup.NONE, completion=None
        )
    for text in ("uffal", "buffalo", "buffalo buffalo", "Buffalo"):
        whole = await store.search.locate(SCOPE, parse_quote(text), source_id=None, limit=1000)
        assert {f.source_id for f in whole} == {b"a" * 16, b"b" * 16, b"c" * 16}, text
        assert all(len(f.node_ids) == 2 for f in whole), text
        for limit in range(1, len(whole) + 1):
            found = await store.search.locate(SCOPE, parse_quote(text), source_id=None, limit=limit)
            assert found == whole[:limit], (text, limit)
