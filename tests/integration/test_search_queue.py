"""The full-text index's waiting work, on the store of each engine (docs/architecture.md,
"Search"): a publish writes and deletes no index row, it records the superseded version as
stale and the new one as to be filled; the indexer fills a version a batch of span rows per
transaction from where the last batch stopped; a search first does its own scope's work (and
only its own), and a search that meets stale rows anyway leaves them out; an erasure deletes
its versions' rows, stale ones included, at once; ``telha check`` accepts waiting work and
still finds a current version neither indexed nor being filled, and stale rows nobody waits
to delete. The indexer actor waits for a burst of publishes to settle before writing, and
never defers waiting work past ``max_defer_s`` while versions keep arriving."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from telha.check.runner import run_checks
from telha.domain.errors import StorageError
from telha.domain.ids import content_hash
from telha.domain.model import Dedup, NewVersion, Scope
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.domain.search_query import parse_query, scope_rowids
from telha.search.indexer import SearchIndexer
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx
from telha.storage.search import index as search_index
from telha.storage.search.queries import Filters
from telha.storage.search.queries import search as search_op
from tests.integration.test_erasure_store import _erase
from tests.support.pg import ENGINES
from tests.support.stores import engine_of, fresh_store
from tests.support.wait import until

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
OTHER = Scope("t", "other")
SOURCE = b"s" * 16


@pytest.fixture(params=ENGINES)
async def indexed(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageEngine]:
    """A fresh store of each engine that keeps the full-text index."""
    async with fresh_store(str(request.param), tmp_path, search=True) as opened:
        yield opened


def _proj(words: list[str]) -> Projection:
    """One PARAGRAPH node per word, each on its own line."""
    text = "".join(f"{w}\n" for w in words).encode()
    spans, nodes, at = [], [], 0
    for i, w in enumerate(words):
        spans.append(SpanOut(at, at + len(w), "body"))
        nodes.append(NodeOut(("PARAGRAPH",), msgspec.json.encode({"i": i}), (i,)))
        at += len(w) + 1
    return Projection(text, spans, nodes, [])


async def _commit(
    store: StorageEngine, words: list[str], scope: Scope = SCOPE, source: bytes = SOURCE
) -> int:
    raw = " ".join(words).encode()
    version = NewVersion(source, "w.txt", "text", content_hash(raw), len(raw), "w", None)
    out = await store.versions.commit(
        scope, version, _proj(words), dedup=Dedup.NONE, completion=None
    )
    assert out.source_version_tx is not None
    return out.source_version_tx


async def _index_rows(store: StorageEngine) -> list[tuple[int, int]]:
    """``(version_tx, start)`` of every index row."""

    async def op(tx: Tx) -> list[tuple[int, int]]:
        rows = await tx.fetchall("SELECT version_tx, start FROM search_spans ORDER BY 1, 2")
        return [(int(a), int(b)) for a, b in rows]

    return await store.read(op)  # type: ignore[attr-defined,no-any-return]


async def _hits(store: StorageEngine, q: str, scope: Scope = SCOPE) -> list[Any]:
    hits, _ = await store.search.page(scope, parse_query(q), Filters(), limit=20, offset=0)
    return hits


async def test_a_publish_queues_and_a_search_indexes_its_scope_first(
    indexed: StorageEngine,
) -> None:
    store = indexed
    v1 = await _commit(store, ["alpha", "beta"])
    assert await _index_rows(store) == []  # queued, not written in the publish
    assert await store.search.queued_versions(SCOPE) == 1
    await _commit(store, ["gamma"], scope=OTHER, source=b"o" * 16)
    assert [h.start for h in await _hits(store, "beta")] == [6]
    assert await store.search.queued_versions(SCOPE) == 0
    assert (
        await store.search.queued_versions(OTHER) == 1
    )  # another scope's queue stays for the indexer
    assert {t for t, _ in await _index_rows(store)} == {v1}
    v2 = await _commit(store, ["alpha", "delta"])
    # The superseded version's rows wait for deletion; a search reading them is not answered.
    assert {t for t, _ in await _index_rows(store)} == {v1}
    terms = parse_query("beta")
    assert await store.read(search_op, SCOPE, terms, Filters(), 20, 0) == []  # type: ignore[attr-defined]
    assert await _hits(store, "beta") == []  # and the search did its scope's work first
    assert {t for t, _ in await _index_rows(store)} == {v2}
    assert [h.version_tx for h in await _hits(store, "delta")] == [v2]


async def test_the_indexer_writes_a_version_in_batches_from_where_it_stopped(
    indexed: StorageEngine,
) -> None:
    store = indexed
    words = [f"w{i:03d}" for i in range(7)]
    v = await _commit(store, words)
    written = []
    while n := await store.search.index_queued(limit=3):
        written.append(n)
        assert len(await _index_rows(store)) == sum(written)
    assert written == [3, 3, 1]
    assert await _index_rows(store) == [(v, 5 * i) for i in range(7)]
    assert await store.search.index_queued() == 0
    report = await run_checks(store)
    assert report.total == 0, [v.line() for v in report.violations]


async def test_a_batch_ends_after_its_time_and_where_batches_end_changes_no_row(
    indexed: StorageEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many small versions waiting: with time to spare (:data:`BATCH_S` a minute) one batch
    settles them all; with none, each batch settles one entry and commits (a long batch
    holds the writer and, on SQLite, the event loop's interpreter lock). The index written
    one entry a batch is the index written in one batch, rowid for rowid (SQLite numbers
    each batch's rows on from the lowest the one before left). Both limits are set here, so
    the machine's speed decides nothing."""
    sources = [bytes([65 + i]) * 16 for i in range(6)]

    async def fill(store: StorageEngine) -> tuple[list[int], list[tuple[Any, ...]]]:
        for i, src in enumerate(sources):
            await _commit(store, [f"w{i}a", f"w{i}b"], source=src)
        steps = []
        while n := await store.search.index_queued():
            steps.append(n)

        async def rows(tx: Tx) -> list[tuple[Any, ...]]:
            got = await tx.fetchall(
                'SELECT rowid, source_id, start, "end", body FROM search_spans ORDER BY rowid'
            )
            return [(int(r), bytes(s), int(a), int(b), str(t)) for r, s, a, b, t in got]

        return steps, await store.read(rows)  # type: ignore[attr-defined]

    monkeypatch.setattr(search_index, "BATCH_S", 60.0)
    big_steps, big_rows = await fill(indexed)
    assert big_steps == [2 * len(sources)]  # every entry in one batch
    monkeypatch.setattr(search_index, "BATCH_S", 0.0)
    engine = engine_of(indexed)
    async with fresh_store(engine, tmp_path / "one", search=True) as one:
        one_steps, one_rows = await fill(one)
    assert one_steps == [2] * len(sources)  # one entry (two span rows) a batch
    if engine == "postgres":  # a fresh database's own sequence: compare all but the rowid
        big_rows, one_rows = [r[1:] for r in big_rows], [r[1:] for r in one_rows]
    assert one_rows == big_rows


async def test_a_scope_whose_rowid_range_is_used_up_is_refused_and_nothing_is_written(
    indexed: StorageEngine,
) -> None:
    """SQLite fills a scope's rowid range from its top down: a scope whose lowest row sits
    one above the range's bottom has no room for a two-row version. The batch fails with a
    :class:`StorageError` naming the scope (the indexer logs it and tries again later), and
    no row is written below the range, into another scope's."""
    if engine_of(indexed) == "postgres":
        pytest.skip("PostgreSQL's index rows take a sequence's ids, not a scope's range")
    store = indexed
    await _commit(store, ["one"], source=b"a" * 16)
    while await store.search.index_queued():
        pass
    lo, _ = scope_rowids(1)

    async def to_bottom(tx: Tx) -> None:
        await tx.execute("UPDATE search_spans SET rowid = ?", lo + 1)

    await store.transaction("test", to_bottom)  # type: ignore[attr-defined]
    await _commit(store, ["two", "three"], source=b"b" * 16)
    with pytest.raises(StorageError, match="scope 1: its full-text index rowids are used up"):
        await store.search.index_queued()

    async def rowids(tx: Tx) -> list[int]:
        return [int(r[0]) for r in await tx.fetchall("SELECT rowid FROM search_spans")]

    assert await store.read(rowids) == [lo + 1]  # type: ignore[attr-defined]


async def test_an_erasure_deletes_stale_and_filling_rows_at_once(indexed: StorageEngine) -> None:
    store = indexed
    await _commit(store, ["secretword", "other"])
    while await store.search.index_queued():
        pass
    await _commit(store, ["secretword", "third"])  # the first version's rows are now stale
    await store.search.index_queued(limit=1)  # the stale rows: one deleted, one waiting
    assert len(await _index_rows(store)) == 1
    assert await store.search.queued_versions() == 2  # a stale version and one being filled
    await _erase(store, SCOPE, SOURCE)
    assert await store.search.queued_versions() == 0
    assert await _index_rows(store) == []
    assert await _hits(store, "secretword") == []


async def test_check_accepts_waiting_work_and_finds_work_nobody_waits_for(
    indexed: StorageEngine,
) -> None:
    store = indexed
    await _commit(store, ["one", "two"])
    while await store.search.index_queued():
        pass
    await _commit(store, ["one", "three"])  # stale rows of the first, the second not filled
    report = await run_checks(store)
    assert report.total == 0, [v.line() for v in report.violations]

    async def forget(tx: Tx) -> None:
        await tx.execute("DELETE FROM search_sources")
        await tx.execute("DELETE FROM search_stale")

    await store.transaction("test", forget)  # type: ignore[attr-defined]
    report = await run_checks(store)
    lines = [v.line() for v in report.violations]
    assert sum("not indexed" in line for line in lines) == 2, lines
    assert sum("not a span row of its source's current version" in line for line in lines) == 2


async def _all_indexed(store: StorageEngine) -> bool:
    return not await store.search.queued_versions(SCOPE)


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
        assert await store.search.queued_versions(SCOPE) == 8
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
