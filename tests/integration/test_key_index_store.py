"""SQLite's match key index on the store itself (docs/architecture.md, "Deferred keys"):
``nodes_by_key`` leaves out the rows of a first single-shot version (their keys are
deferred) but keeps its worker-supplied ids, and the statements that find rows by key — the
first publish's close of worker ids, a stream's probes by key — are planned through it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from telha.domain.ids import content_hash
from telha.domain.model import Dedup, LeaseRef, NewJob, NewVersion, Scope, StreamPart
from telha.domain.projection import Projection
from tests.support.stores import fresh_store
from tests.support.word_store import index_entries, word_projection

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
NOW = 1_000_000_000_000
SOURCE = b"s" * 16


def _proj(words: list[str]) -> Projection:
    """One PARA node per word (no id: matched by key) and one node with a worker id."""
    return word_projection(words, "PARA")


async def test_first_version_stays_out_of_the_key_index_and_probes_use_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    statements: list[str] = []
    async with fresh_store("sqlite", tmp_path) as store:
        writer = store._writer  # type: ignore[attr-defined]
        await writer._execute(writer._conn.set_trace_callback, statements.append)
        raw = b"v1"
        v1 = NewVersion(SOURCE, "a.txt", "text", content_hash(raw), len(raw), "w", None)
        out = await store.versions.commit(
            SCOPE, v1, _proj(["alpha", "beta", "gamma"]), dedup=Dedup.NONE
        )
        assert out.source_version_tx is not None
        # Four rows written; only the worker id's (no key) is in the index.
        assert index_entries(db, "nodes_by_key") == 1
        # A stream of the same source writes the deferred keys at its first part and probes
        # the previous version's rows by key: they match, and keep their ids.
        job = NewJob(b"j" * 16, "ingest:text", "text", SOURCE, b"v2", b'{"name":"a.txt"}')
        await store.jobs.enqueue(SCOPE, job, now_us=NOW, dedup=False)
        held = await store.jobs.lease_next(
            ["text"], scope=SCOPE, worker_id="w", now_us=NOW, lease_us=10**9
        )
        assert held is not None
        lease = LeaseRef(held.job_id, held.lease_generation)
        v2 = NewVersion(SOURCE, "a.txt", "text", content_hash(b"v2"), 2, "w", job.job_id)
        part = StreamPart(lease, "w", 0, False, 0, NOW, 10**9, stats=b"{}")
        done = await store.versions.apply_stream_part(
            SCOPE, v2, _proj(["alpha", "beta", "delta"]), part
        )
        assert done.finalized
        assert done.node_ids[:2] == out.node_ids[:2] and done.node_ids[2] != out.node_ids[2]
        await writer._execute(writer._conn.set_trace_callback, None)
    assert index_entries(db, "nodes_by_key") > 1  # the keyed rows are in it now
    by_key = [
        s for s in statements
        if "match_key IN (" in s or "w.match_key IS NULL" in s
    ]  # fmt: skip
    assert any("match_key IN (" in s for s in by_key) and any("IS NULL" in s for s in by_key)
    with sqlite3.connect(db) as conn:
        for sql in by_key:
            plan = " / ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "INDEX nodes_by_key " in plan, (sql, plan)


async def test_all_deferred_keys_are_stored_as_the_deferred_key(tmp_path: Path) -> None:
    """A first version with no worker-supplied id (a JSON batch) has every key deferred:
    its rows are written with the key as an SQL literal, which must be ``DEFERRED`` itself
    (x'', out of the index; NULL would put every row in it), and a second version still
    matches them by key."""
    db = tmp_path / "store.db"
    words = ["alpha", "beta", "gamma"]
    proj = word_projection(words, "PARA")
    proj.nodes.pop()  # no worker-identified node
    async with fresh_store("sqlite", tmp_path) as store:
        v1 = NewVersion(SOURCE, "a.txt", "text", content_hash(b"v1"), 2, "w", None)
        out = await store.versions.commit(SCOPE, v1, proj, dedup=Dedup.NONE)
        with sqlite3.connect(db) as conn:
            keys = conn.execute("SELECT DISTINCT quote(match_key) FROM nodes").fetchall()
        assert keys == [("X''",)]
        assert index_entries(db, "nodes_by_key") == 0
        again = word_projection(["alpha", "beta", "delta"], "PARA")
        again.nodes.pop()
        v2 = NewVersion(SOURCE, "a.txt", "text", content_hash(b"v2"), 2, "w", None)
        done = await store.versions.commit(SCOPE, v2, again, dedup=Dedup.NONE)
    assert done.node_ids[:2] == out.node_ids[:2] and done.node_ids[2] != out.node_ids[2]
