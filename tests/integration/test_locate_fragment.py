"""A one-word locate's scan of the scope's index rows (docs/rest-api.md, "Locate a quote")
on both engines: its candidates are the rows whose *words* contain the fragment. On
PostgreSQL the index row is a ``tsvector`` whose text also holds each word's positions, so a
digit fragment must not take every row with such a position for a candidate (the first
``LOCATE_CANDIDATES`` of them crowded the true rows out)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from telha.domain.search_query import parse_quote
from telha.storage import StorageEngine
from telha.storage.core.search import LOCATE_CANDIDATES
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
    found = await store.locate(SCOPE, parse_quote("1"), source_id=None, limit=10)
    assert [(f.source_id, f.start, f.end) for f in found] == [(b"b" * 16, 6, 7)]
