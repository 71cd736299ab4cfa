"""Kept edges on the store itself, on both engines (docs/architecture.md, "Kept edges"): a
new version keeps the open row of every edge the source's current graph already has, writes
only its new edges, and its publish closes the ones it dropped; reads now and as of the old
version see each version's edges exactly. A version written while an older version of the
same source is still streaming writes every edge itself instead (its marks would be
overwritten), and the end state has one open row per edge all the same."""

from __future__ import annotations

import msgspec
import pytest

from telha.check.runner import run_checks
from telha.domain.ids import content_hash
from telha.domain.model import Dedup, Direction, LeaseRef, NewJob, NewVersion, Scope, StreamPart
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx
from tests.integration.test_erasure_store import _erase

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
NOW = 1_000_000_000_000
SOURCE = b"s" * 16
IDS = {name: bytes([0x41 + i]) * 16 for i, name in enumerate("ABCD")}  # worker-supplied ids


def _proj(targets: str, base: int = 0) -> Projection:
    """Node A and one node per letter of ``targets``, with an edge A → each."""
    text = ("A" + targets).encode()
    spans = [SpanOut(base + i, base + i + 1, "body") for i in range(len(text))]
    nodes = [
        NodeOut(("N",), msgspec.json.encode({"n": c}), (i,), IDS[c])
        for i, c in enumerate("A" + targets)
    ]
    edges = [EdgeOut("LINKS", 0, i + 1, b"{}") for i in range(len(targets))]
    return Projection(text, spans, nodes, edges, base=base)


def _version(targets: str, job_id: bytes | None = None) -> NewVersion:
    raw = f"raw:{targets}".encode()
    return NewVersion(SOURCE, "g.txt", "text", content_hash(raw), len(raw), "w", job_id)


async def _single_shot(store: StorageEngine, targets: str) -> int:
    out = await store.versions.commit(
        SCOPE, _version(targets), _proj(targets), dedup=Dedup.NONE, completion=None
    )
    assert out.source_version_tx is not None
    return out.source_version_tx


async def _targets(store: StorageEngine, as_of: int | None = None) -> set[str]:
    edges = await store.reads.edges(SCOPE, IDS["A"], Direction.OUT, as_of)
    names = {v: k for k, v in IDS.items()}
    return {names[e.to_id] for e in edges}


async def _rows(store: StorageEngine) -> list[tuple[bytes, int, int | None, int | None]]:
    """Every edge row of the source: ``(edge_id, tx_from, tx_to, seen_tx)``."""

    async def op(tx: Tx) -> list[tuple[bytes, int, int | None, int | None]]:
        rows = await tx.fetchall(
            "SELECT edge_id, tx_from, tx_to, seen_tx FROM edges WHERE source_id = ?"
            " ORDER BY tx_from, edge_id",
            SOURCE,
        )
        return [(bytes(r[0]), r[1], r[2], r[3]) for r in rows]

    return await store.read(op)  # type: ignore[attr-defined,no-any-return]


def _one_open_row_each(rows: list[tuple[bytes, int, int | None, int | None]]) -> None:
    opened = [r[0] for r in rows if r[2] is None]
    assert len(opened) == len(set(opened))


async def test_unchanged_edges_stay_open_and_dropped_ones_close(store: StorageEngine) -> None:
    v1 = await _single_shot(store, "BC")
    v2 = await _single_shot(store, "BD")
    assert await _targets(store) == {"B", "D"}
    assert await _targets(store, v2 - 1) == {"B", "C"}
    assert await _targets(store, v1) == {"B", "C"}
    rows = await _rows(store)
    assert sorted((r[1], r[2] or 0) for r in rows) == [(v1, 0), (v1, v2), (v2, 0)]
    kept = [r for r in rows if r[1] == v1 and r[2] is None]
    assert len(kept) == 1 and kept[0][3] == v2  # A → B: v1's row, marked by v2
    closed = [r for r in rows if r[2] is not None]
    assert len(closed) == 1 and closed[0][2] == v2  # A → C
    # The same again: nothing new is written, A → B and A → D are both kept.
    v3 = await _single_shot(store, "BD")
    assert await _targets(store) == {"B", "D"}
    assert len(await _rows(store)) == 3
    assert {r[3] for r in await _rows(store) if r[2] is None} == {v3}
    _one_open_row_each(await _rows(store))


async def _stream_part(store: StorageEngine, targets: str) -> int:
    """Enqueue and lease a job of the source and stream its first part (``targets``); the
    pinned version's tx. The stream stays open."""
    raw = f"stream:{targets}".encode()
    job = NewJob(b"j" * 16, "ingest:text", "text", SOURCE, content_hash(raw), b"{}")
    await store.jobs.enqueue(SCOPE, job, now_us=NOW, dedup=False)
    held = await store.jobs.lease_next(
        ["text"], scope=SCOPE, worker_id="w", now_us=NOW, lease_us=10**9
    )
    assert held is not None
    part = StreamPart(LeaseRef(held.job_id, held.lease_generation), "w", 0, True, 0, NOW,
                      10**9, stats=b"{}")  # fmt: skip
    out = await store.versions.apply_stream_part(
        SCOPE, _version(targets, job.job_id), _proj(targets), part
    )
    assert out.source_version_tx is not None
    return out.source_version_tx


async def test_a_later_streams_marks_leave_the_current_graph_and_the_check_whole(
    store: StorageEngine,
) -> None:
    """v2 keeps v1's A → B; a newer stream that asserts it again re-marks that row while v2
    is still current: reads and ``telha check`` still see exactly v2's graph."""
    await _single_shot(store, "BC")
    v2 = await _single_shot(store, "BD")
    v3 = await _stream_part(store, "BD")
    assert v3 > v2
    marks = {r[3] for r in await _rows(store) if r[2] is None}
    assert marks == {v3}  # both of v2's edges, A → B kept from v1 and A → D, re-marked
    assert await _targets(store) == {"B", "D"}
    report = await run_checks(store)
    assert report.total == 0, [v.line() for v in report.violations]


async def test_a_version_beside_an_older_live_stream_writes_its_own_edges(
    store: StorageEngine,
) -> None:
    v1 = await _single_shot(store, "BC")
    raw = b"stream"
    job = NewJob(b"j" * 16, "ingest:text", "text", SOURCE, content_hash(raw), b"{}")
    await store.jobs.enqueue(SCOPE, job, now_us=NOW, dedup=False)
    held = await store.jobs.lease_next(
        ["text"], scope=SCOPE, worker_id="w", now_us=NOW, lease_us=10**9
    )
    assert held is not None
    lease = LeaseRef(held.job_id, held.lease_generation)
    part = StreamPart(lease, "w", 0, True, 0, NOW, 10**9, stats=b"{}")
    stream = _version("BC", job.job_id)
    pinned = await store.versions.apply_stream_part(SCOPE, stream, _proj("BC"), part)
    assert pinned.source_version_tx is not None and pinned.source_version_tx > v1
    # The stream (older, live) marked v1's two edges as its own; v3 must not rely on marks
    # it would overwrite: it writes A → B again, and its publish closes both v1 rows.
    v3 = await _single_shot(store, "BD")
    assert await _targets(store) == {"B", "D"}
    assert await _targets(store, v3 - 1) == {"B", "C"}
    rows = await _rows(store)
    _one_open_row_each(rows)
    assert {(r[1], r[2]) for r in rows if r[1] == v1} == {(v1, v3)}
    assert len([r for r in rows if r[1] == v3 and r[2] is None]) == 2
    # The stream finalizes after a newer version was published: it is superseded.
    last = StreamPart(lease, "w", 1, False, 3, NOW + 1, 10**9, stats=b"{}")
    done = await store.versions.apply_stream_part(SCOPE, stream, _proj("", 3), last)
    assert done.finalized
    assert await _targets(store) == {"B", "D"}
    _one_open_row_each(await _rows(store))


async def test_erasing_an_old_versions_bytes_leaves_the_edges_a_later_version_kept(
    store: StorageEngine,
) -> None:
    """Another source with v1's bytes is erased, and v1 with it (erasure goes by bytes):
    the edge v2 kept from v1 stays in v2's graph, now a row of v2's own."""
    v1 = await _single_shot(store, "BC")
    v2 = await _single_shot(store, "BD")
    other = b"o" * 16
    text = b"same bytes"
    twin = NewVersion(other, "twin.txt", "text", _version("BC").content_hash, 9, "w", None)
    single = Projection(text, [SpanOut(0, len(text), "body")], [NodeOut(("DOC",), b"{}", (0,))])
    await store.versions.commit(SCOPE, twin, single, dedup=Dedup.NONE, completion=None)
    await _erase(store, SCOPE, other)
    assert await _targets(store) == {"B", "D"}
    rows = await _rows(store)
    _one_open_row_each(rows)
    opened = {(r[1], r[3]) for r in rows if r[2] is None}
    assert opened == {(v2, None)}  # A → B re-homed at v2, A → D v2's own
    assert all(r[2] is not None for r in rows if r[1] == v1)
    report = await run_checks(store)
    assert report.total == 0, [v.line() for v in report.violations]
