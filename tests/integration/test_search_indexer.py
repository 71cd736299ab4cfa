"""The search indexer actor on a real store of each engine: it waits for a burst of
publishes to settle before writing the index, and never defers waiting work past
``max_defer_s`` while versions keep arriving (docs/architecture.md, "Search")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from telha.search_indexer import SearchIndexer
from telha.storage import StorageEngine
from tests.integration.test_search_queue import SCOPE, _commit, _index_rows
from tests.support.pg import ENGINES
from tests.support.stores import fresh_store
from tests.support.wait import until

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ENGINES)
async def indexed(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageEngine]:
    """A fresh store of each engine that keeps the full-text index."""
    async with fresh_store(str(request.param), tmp_path, search=True) as opened:
        yield opened


async def _all_indexed(store: StorageEngine) -> bool:
    return not await store.queued_versions(SCOPE)


def _source(i: int) -> bytes:
    return f"{i:016d}".encode()


async def test_a_burst_of_publishes_is_indexed_once_it_settles(indexed: StorageEngine) -> None:
    store = indexed
    indexer = SearchIndexer(store, idle_s=0.05, settle_s=2.0, max_defer_s=60.0)
    async with anyio.create_task_group() as tg:
        await tg.start(indexer.run)
        tx = [await _commit(store, [f"burst{i}"], source=_source(i)) for i in range(4)]
        for i in range(4, 8):
            await anyio.sleep(0.05)
            tx.append(await _commit(store, [f"burst{i}"], source=_source(i)))
        # Versions kept arriving: nothing of the index was written while they did.
        assert await _index_rows(store) == []
        assert await store.queued_versions(SCOPE) == 8
        await until(lambda: _all_indexed(store))
        tg.cancel_scope.cancel()
    assert await _index_rows(store) == [(t, 0) for t in tx]


async def test_a_steady_stream_is_indexed_while_it_arrives(indexed: StorageEngine) -> None:
    store = indexed
    indexer = SearchIndexer(store, idle_s=0.05, settle_s=0.5, max_defer_s=1.0)
    async with anyio.create_task_group() as tg:
        await tg.start(indexer.run)
        first = await _commit(store, ["steady0"], source=_source(0))
        written: list[tuple[int, int]] = []
        with anyio.fail_after(30):
            i = 1
            while not written:  # a new version every 0.1 s, for as long as it takes
                await anyio.sleep(0.1)
                await _commit(store, [f"steady{i}"], source=_source(i))
                written = await _index_rows(store)
                i += 1
        tg.cancel_scope.cancel()
    # Deferred at most max_defer_s, then written while versions still arrived.
    assert (first, 0) in written
    assert i > 5
