"""The search's rank window (docs/rest-api.md, "Search", "Rank window"): on SQLite a query
matching more spans than the window ranks only its newest matches; one matching fewer, a
filtered one whose filtered matches fit, and ``rank_window = 0`` are ranked in full; paging
past the window ranks a larger one. PostgreSQL ranks every match whatever the window."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from telha.domain.ids import content_hash
from telha.domain.model import Dedup, NewVersion, Scope
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.domain.search_query import parse_query, scope_rowids
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx
from telha.storage.search.queries import Filters, SearchHit
from telha.storage.search.queries import search as search_op
from tests.support.pg import ENGINES
from tests.support.stores import engine_of, fresh_store

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
OLD, NEW = b"a" * 16, b"b" * 16
#: The older source's one span is the best match of ``zeta`` (short, the word twice); the
#: newer source's five are longer, so BM25 ranks them below it.
OLD_LINES = ["zeta zeta"]
NEW_LINES = [f"zeta one two three four five six seven {w}" for w in ("a", "b", "c", "six", "six")]


@pytest.fixture(params=ENGINES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageEngine]:
    """A fresh store of each engine with the index, holding the older source, then the
    newer one (indexed in that order, so the newer one's rows are the newest)."""
    async with fresh_store(str(request.param), tmp_path, search=True) as opened:
        await _commit(opened, OLD, OLD_LINES)
        await _hits(opened, "zeta", 0)  # indexes the older source first
        await _commit(opened, NEW, NEW_LINES)
        yield opened


def _proj(lines: list[str]) -> Projection:
    """One PARAGRAPH node per line."""
    text = "".join(f"{w}\n" for w in lines).encode()
    spans, nodes, at = [], [], 0
    for i, line in enumerate(lines):
        spans.append(SpanOut(at, at + len(line), "body"))
        nodes.append(NodeOut(("PARAGRAPH",), msgspec.json.encode({"i": i}), (i,)))
        at += len(line) + 1
    return Projection(text, spans, nodes, [])


async def _commit(store: StorageEngine, source: bytes, lines: list[str]) -> None:
    raw = "\n".join(lines).encode()
    version = NewVersion(source, "w.txt", "text", content_hash(raw), len(raw), "w", None)
    await store.versions.commit(SCOPE, version, _proj(lines), dedup=Dedup.NONE, completion=None)


async def _hits(
    store: StorageEngine,
    q: str,
    window: int,
    *,
    limit: int = 2,
    offset: int = 0,
    filters: Filters | None = None,
) -> list[SearchHit]:
    hits, _ = await store.search.page(
        SCOPE, parse_query(q), filters or Filters(), limit=limit, offset=offset,
        rank_window=window,
    )  # fmt: skip
    return hits


async def test_a_query_matching_more_than_the_window_ranks_its_newest_matches(
    store: StorageEngine,
) -> None:
    exact = await _hits(store, "zeta", 0)
    assert exact[0].source_id == OLD  # ranked in full: the best match is the older span
    windowed = await _hits(store, "zeta", 3)
    if engine_of(store) == "postgres":  # ranks every match
        assert windowed == exact
        return
    assert len(windowed) == 2
    assert {h.source_id for h in windowed} == {NEW}  # the older span is outside the window
    # The window is the last three rows indexed: the newer source's last three lines.
    starts = [len("".join(f"{w}\n" for w in NEW_LINES[:i])) for i in range(len(NEW_LINES))]
    assert {h.start for h in windowed} <= set(starts[2:])


async def test_fewer_matches_than_the_window_are_ranked_in_full(store: StorageEngine) -> None:
    # Two spans hold the phrase, with equal scores: ranked in full, the older comes first
    # (a window of the newest one alone would answer the other).
    exact = await _hits(store, '"seven six"', 0, limit=1)
    assert await _hits(store, '"seven six"', 3, limit=1) == exact
    assert exact[0].start == len("".join(f"{w}\n" for w in NEW_LINES[:3]))
    only_old = Filters(source_id=OLD)
    assert [h.source_id for h in await _hits(store, "zeta", 3, filters=only_old)] == [OLD]


async def test_paging_past_the_window_ranks_a_larger_one(store: StorageEngine) -> None:
    every = await _hits(store, "zeta", 0, limit=10)
    assert len(every) == 6
    # offset 4 + limit 2 = 6 >= every match: ranked in full, the exact order's last page.
    assert await _hits(store, "zeta", 3, limit=2, offset=4) == every[4:6]


async def test_the_window_leaves_out_stale_rows(store: StorageEngine) -> None:
    """A new version of the newer source, not indexed yet: its superseded rows wait to be
    deleted, and a windowed search read before the indexer ran leaves them out of the
    window's bound and of the ranking alike."""
    await _commit(store, NEW, ["zeta gone"])
    hits = await store.read(  # type: ignore[attr-defined]
        search_op, SCOPE, parse_query("zeta"), Filters(), 10, 0, 3
    )
    assert [h.source_id for h in hits] == [OLD]
    assert {h.source_id for h in await _hits(store, "zeta", 3, limit=10)} == {OLD, NEW}


async def test_a_window_answers_the_full_order_of_its_newest_matches(
    store: StorageEngine,
) -> None:
    """A row's score does not depend on which other rows are ranked, so a windowed page is
    the fully ranked order restricted to the newest ``max(window, offset + limit)`` matches:
    checked for several windows and pages over 40 spans of different lengths and counts of
    the word (indexed in span order, so the newest are the last lines)."""
    third = b"c" * 16
    lines = [
        " ".join(["kappa"] * (1 + i % 3) + [f"w{j}" for j in range((i * 7) % 11)])
        for i in range(40)
    ]
    await _commit(store, third, lines)
    full = await _hits(store, "kappa", 0, limit=40)
    assert len(full) == 40
    starts = [len("".join(f"{w}\n" for w in lines[:i])) for i in range(len(lines))]
    postgres = engine_of(store) == "postgres"
    for window, limit, offset in [(1, 5, 0), (7, 5, 0), (7, 5, 5), (12, 3, 9), (25, 10, 0)]:
        got = await _hits(store, "kappa", window, limit=limit, offset=offset)
        newest = set(starts[-max(window, offset + limit) :])
        inside = full if postgres else [h for h in full if h.start in newest]
        assert got == inside[offset : offset + limit], (window, limit, offset)


async def test_a_scopes_rows_are_numbered_newest_lowest(store: StorageEngine) -> None:
    """SQLite fills a scope's rowid range from its top down (docs/architecture.md,
    "Search"): the newer source's rows hold lower rowids than the older one's, so the rank
    window's walk from the newest match is FTS5's forward one; inside one version the
    first span row holds the highest rowid."""
    if engine_of(store) == "postgres":
        pytest.skip("PostgreSQL ranks every match: its rowids order nothing")
    await _hits(store, "zeta", 0)  # indexes the newer source
    rows = await store.read(_rowids)  # type: ignore[attr-defined]
    lo, hi = scope_rowids(1)
    assert all(lo <= r < hi for r, _, _ in rows)
    old = [r for r, src, _ in rows if src == OLD]
    new = [r for r, src, start in sorted(rows, key=lambda x: x[2]) if src == NEW]
    assert len(old) == 1 and len(new) == len(NEW_LINES)
    assert max(new) < min(old)
    assert new == sorted(new, reverse=True)  # by start: highest first
    assert max(old) == hi - 1  # the first row indexed takes the range's top


async def _rowids(tx: Tx) -> list[tuple[int, bytes, int]]:
    rows = await tx.fetchall("SELECT rowid, source_id, start FROM search_spans")
    return [(int(r), bytes(s), int(st)) for r, s, st in rows]
