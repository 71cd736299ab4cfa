"""A version's rows on SQLite (docs/architecture.md, "A version's rows"): a source's first
version enters no by-version index, the rows a later version closes do, and every read of
all of a version's rows — the diff, the erasure preview, the chunk inputs — answers the same
whether that version's rows are open or closed, each half planned through an index."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from telha.domain.ids import content_hash
from telha.domain.model import Dedup, NewVersion, Scope
from telha.domain.projection import Projection
from tests.support.stores import fresh_store
from tests.support.word_store import index_entries, word_projection

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
SOURCE = b"s" * 16
SECTION = msgspec.json.encode({"level": 1})


def _proj(words: list[str]) -> Projection:
    """One SECTION node per word (no id: matched by key) and one node with a worker id."""
    return word_projection(words, "SECTION", SECTION)


def _version(raw: bytes) -> NewVersion:
    return NewVersion(SOURCE, "a.txt", "text", content_hash(raw), len(raw), "w", None)


def _closed_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM nodes WHERE tx_to IS NOT NULL").fetchone()[0])


async def _whole_diff(
    store: Any, from_tx: int, to_tx: int
) -> tuple[list[bytes], list[bytes], list[bytes], int]:
    """Every page of the diff at one id a page: (added, removed, changed) ids and unchanged."""
    added: list[bytes] = []
    removed: list[bytes] = []
    changed: list[bytes] = []
    after: bytes | None = None
    while True:
        page = await store.reads.diff(
            SCOPE, SOURCE, from_tx=from_tx, to_tx=to_tx, limit=1, after=after
        )
        added += [n.node_id for n in page.added]
        removed += [n.node_id for n in page.removed]
        changed += [b.node_id for b, _ in page.changed]
        if page.next_after is None:
            return added, removed, changed, page.unchanged
        after = page.next_after


async def test_a_versions_rows_read_the_same_open_or_closed(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    statements: list[str] = []
    async with fresh_store("sqlite", tmp_path) as store:
        traced = [store._writer, *store._readers]  # type: ignore[attr-defined]
        v1 = await store.versions.commit(
            SCOPE, _version(b"v1"), _proj(["alpha", "beta", "gamma"]), dedup=Dedup.NONE
        )
        # The first version's four rows are open: none is in the by-version index.
        assert index_entries(db, "closed_nodes_by_version") == 0
        v2 = await store.versions.commit(
            SCOPE, _version(b"v2"), _proj(["alpha", "delta", "gamma", "eps"]), dedup=Dedup.NONE
        )
        assert v1.source_version_tx is not None and v2.source_version_tx is not None
        t1, t2 = v1.source_version_tx, v2.source_version_tx
        # v2 superseded v1: each of v1's rows is closed, and only those are in the index.
        assert _closed_rows(db) == 4
        assert index_entries(db, "closed_nodes_by_version") == 4

        for c in traced:
            await c._execute(c._conn.set_trace_callback, statements.append)
        open_diff = await _whole_diff(store, t1, t2)
        open_preview = await store.erasure.preview(SCOPE, SOURCE, t2)
        open_chunks = await store.reads.chunk_inputs(SCOPE, SOURCE, t2)
        # Retiring closes v2's rows: the same reads now find them through the other half.
        await store.versions.retire(SCOPE, SOURCE, "test")
        assert index_entries(db, "closed_nodes_by_version") == _closed_rows(db) == 9
        closed_diff = await _whole_diff(store, t1, t2)
        closed_preview = await store.erasure.preview(SCOPE, SOURCE, t2)
        closed_chunks = await store.reads.chunk_inputs(SCOPE, SOURCE, t2)
        for c in traced:
            await c._execute(c._conn.set_trace_callback, None)

    added, removed, changed, unchanged = open_diff
    assert len(added) == 2 and len(removed) == 1 and changed == [] and unchanged == 3
    assert added == sorted(added) and set(added).isdisjoint(v1.node_ids)
    assert removed == [v1.node_ids[1]]
    assert closed_diff == open_diff
    assert [p.nodes for p in open_preview] == [p.nodes for p in closed_preview] == [5]
    assert set(open_chunks.nodes) == set(closed_chunks.nodes) == set(v2.node_ids[:4])

    # Each statement that reads a version's rows is planned through an index, not a walk
    # of the scope's rows.
    by_version = [s for s in statements if "FROM nodes" in s and "tx_from = " in s]
    assert len(by_version) >= 6
    with sqlite3.connect(db) as conn:
        for sql in by_version:
            plan = " / ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "PRIMARY KEY (scope_id=?)" not in plan and " SCAN " not in f" {plan}", (
                sql,
                plan,
            )
