"""Inherited match keys on the store itself, on both engines (docs/architecture.md, "Deferred
keys"): a streamed re-ingest stores ``INHERITED`` in the rows of the nodes it matched, and
every later version — streamed or whole — still finds those nodes by their key, through the
rows of theirs that hold it. Repeated keys keep their ids in id order across parts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from telha.domain.identity import INHERITED
from telha.domain.ids import content_hash
from telha.domain.model import Dedup, LeaseRef, NewJob, NewVersion, Scope, StreamPart
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.storage import StorageEngine
from tests.support.stores import fresh_store
from tests.support.word_store import index_entries

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
NOW = 1_000_000_000_000
SOURCE = b"s" * 16


def _words(words: list[str], base: int = 0) -> Projection:
    """One PARA node per word (no id: matched by key), each word followed by a space; the
    text starts at ``base`` (a later part of a stream)."""
    text = b"".join(w.encode() + b" " for w in words)
    spans, start = [], base
    for w in words:
        spans.append(SpanOut(start, start + len(w), "body"))
        start += len(w) + 1
    nodes = [NodeOut(("PARA",), b"{}", (i,)) for i in range(len(words))]
    return Projection(text, spans, nodes, base=base)


async def _stream(store: StorageEngine, n: int, parts: list[list[str]]) -> tuple[list[bytes], int]:
    """Version ``n`` of the source, streamed in ``parts``: its node ids in order, its tx."""
    raw = b"v%d" % n
    job = NewJob(b"%02d" % n * 8, "ingest:text", "text", SOURCE, raw, b'{"name":"a.txt"}')
    await store.jobs.enqueue(SCOPE, job, now_us=NOW + n, dedup=False)
    held = await store.jobs.lease_next(
        ["text"], scope=SCOPE, worker_id="w", now_us=NOW + n, lease_us=10**9
    )
    assert held is not None
    lease = LeaseRef(held.job_id, held.lease_generation)
    version = NewVersion(SOURCE, "a.txt", "text", content_hash(raw), len(raw), "w", job.job_id)
    ids: list[bytes] = []
    base = 0
    for seq, words in enumerate(parts):
        last = seq == len(parts) - 1
        part = StreamPart(lease, "w", seq, not last, base, NOW + n, 10**9, stats=b"{}")
        proj = _words(words, base)
        out = await store.versions.apply_stream_part(SCOPE, version, proj, part)
        ids += out.node_ids
        base += len(proj.canonical)
        tx = out.source_version_tx
    assert out.finalized
    return ids, tx


def _stored_keys(db: Path, tx: int) -> list[bytes]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT match_key FROM nodes WHERE tx_from = ? ORDER BY node_id", (tx,)
        ).fetchall()
    return [bytes(r[0]) for r in rows]


async def test_matched_rows_inherit_their_keys_and_later_versions_still_match(
    engine: str, tmp_path: Path
) -> None:
    async with fresh_store(engine, tmp_path) as store:
        v1, _ = await _stream(store, 1, [["alpha", "beta", "alpha"], ["gamma", "alpha"]])
        a1, b, a2, _gamma, a3 = v1
        assert a1 < a2 < a3
        # Three alphas again, across both parts: the n-th takes the n-th unclaimed id.
        v2, tx2 = await _stream(store, 2, [["alpha", "beta"], ["delta", "alpha", "alpha"]])
        assert [v2[i] for i in (0, 1, 3, 4)] == [a1, b, a2, a3]
        delta = v2[2]
        assert delta not in v1
        if engine == "sqlite":
            keys = _stored_keys(tmp_path / "store.db", tx2)
            assert keys.count(INHERITED) == 4 and len(keys) == 5  # delta's is its own
            # The key index: v1's five rows and delta's, none of the inherited ones.
            assert index_entries(tmp_path / "store.db", "nodes_by_key") == 6
        # A later stream finds them through the rows that hold their keys.
        v3, _ = await _stream(store, 3, [["beta", "alpha", "alpha", "alpha", "delta"]])
        assert v3 == [b, a1, a2, a3, delta]
        # So does a whole version.
        raw = b"v4"
        whole = NewVersion(SOURCE, "a.txt", "text", content_hash(raw), 2, "w", None)
        out = await store.versions.commit(
            SCOPE, whole, _words(["alpha", "delta", "beta", "gamma"]), dedup=Dedup.NONE
        )
        assert out.node_ids[:3] == [a1, delta, b] and out.node_ids[3] not in v1
