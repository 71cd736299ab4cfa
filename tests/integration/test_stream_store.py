"""Streamed submissions on the store itself, on both engines (one operation written once in
telha.storage.versions.streams): a stream whose text crosses 1 MiB chunk boundaries, a replayed
partial, the seq, base and UTF-8 boundary checks, the finalize re-hash; the blocklist at the
pin and at the finalize (everything the stream wrote purged); another worker's stream
abandoned; a single shot while the worker's own stream is open."""

from __future__ import annotations

import blake3
import pytest

from telha.domain.errors import InvalidStream, OutOfSync
from telha.domain.ids import content_hash
from telha.domain.model import (
    BLOB_CHUNK,
    Dedup,
    JobCompletion,
    LeaseRef,
    NewJob,
    NewVersion,
    Scope,
    StreamPart,
)
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
NOW = 1_000_000_000_000
SOURCE = b"s" * 16
RAW = b"r" * 32
JOB = NewJob(b"j" * 16, "ingest:csv", "csv", SOURCE, RAW, b'{"name":"a.csv"}')
VERSION = NewVersion(SOURCE, "a.csv", "csv", RAW, 10, "w1", JOB.job_id)


async def _lease(store: StorageEngine) -> LeaseRef:
    held = await store.jobs.lease_next(
        ["csv"], scope=SCOPE, worker_id="w1", now_us=NOW, lease_us=10**9
    )
    assert held is not None
    return LeaseRef(held.job_id, held.lease_generation)


def _part(
    lease: LeaseRef, seq: int, base: int, *, partial: bool = True, worker: str = "w1"
) -> StreamPart:
    return StreamPart(lease, worker, seq, partial, base, NOW + seq, 10**9, stats=b"{}")


def _proj(text: bytes, base: int, earlier: list[int] | None = None) -> Projection:
    return Projection(
        text,
        [SpanOut(base, base + len(text), "body")],
        [NodeOut(("PART",), b"{}", (0,))],
        base=base,
        earlier_offsets=earlier or [],
    )


async def _block(store: StorageEngine, digest: bytes) -> None:
    async def op(tx: Tx) -> None:
        await tx.execute(
            "INSERT INTO erasure_blocklist (scope_id, digest, kind, erasure_id, created_at)"
            " VALUES (?, ?, 'content', ?, ?)",
            await tx.scope_id(SCOPE), digest, b"e" * 16, NOW,
        )  # fmt: skip

    await store.transaction("block", op)  # type: ignore[attr-defined]


async def _count(store: StorageEngine, table: str) -> int:
    async def op(tx: Tx) -> int:
        row = await tx.fetchone(f"SELECT count(*) FROM {table}")
        return int(row[0]) if row is not None else 0

    return await store.read(op)  # type: ignore[attr-defined,no-any-return]


async def test_stream_across_chunks_with_replay_and_checks(store: StorageEngine) -> None:
    await store.jobs.enqueue(SCOPE, JOB, now_us=NOW, dedup=False)
    lease = await _lease(store)
    first = "é".encode() * 600_000  # 1.2 MB: one full chunk and part of the next
    second = b"x" * 1001 + "é".encode() * 500_000  # fills chunk 1, starts chunk 2
    out = await store.versions.apply_stream_part(
        SCOPE, VERSION, _proj(first, 0), _part(lease, 0, 0)
    )
    assert not out.replay and not out.finalized and len(out.node_ids) == 1
    pinned = out.source_version_tx
    assert await store.versions.stream_base(JOB.job_id, lease, "w1") == len(first)
    assert await store.versions.stream_base(JOB.job_id, lease, "w2") == 0
    assert await store.versions.latest(SCOPE, SOURCE) is None  # not a version yet
    again = await store.versions.apply_stream_part(
        SCOPE, VERSION, _proj(first, 0), _part(lease, 0, 0)
    )
    assert again.replay and again.node_ids == out.node_ids and again.source_version_tx == pinned
    with pytest.raises(OutOfSync, match="expected seq 1, got 2"):
        await store.versions.apply_stream_part(
            SCOPE, VERSION, _proj(second, len(first)), _part(lease, 2, len(first))
        )
    with pytest.raises(OutOfSync, match=f"the stream holds {len(first)}"):
        await store.versions.apply_stream_part(SCOPE, VERSION, _proj(second, 5), _part(lease, 1, 5))
    with pytest.raises(InvalidStream, match=f"offset {BLOB_CHUNK + 1} is not"):
        await store.versions.apply_stream_part(
            SCOPE, VERSION, _proj(second, len(first), [2, BLOB_CHUNK + 1]),
            _part(lease, 1, len(first)),
        )  # fmt: skip
    ok = _proj(second, len(first), [0, BLOB_CHUNK, len(first) - 2])
    out = await store.versions.apply_stream_part(SCOPE, VERSION, ok, _part(lease, 1, len(first)))
    assert out.source_version_tx == pinned and not out.replay
    base = len(first) + len(second)
    assert (
        base > 2 * BLOB_CHUNK and await store.versions.stream_base(JOB.job_id, lease, "w1") == base
    )
    last = b"end"
    done = await store.versions.apply_stream_part(
        SCOPE, VERSION, _proj(last, base), _part(lease, 2, base, partial=False)
    )
    assert done.finalized and done.source_version_tx == pinned
    text = first + second + last
    latest = await store.versions.latest(SCOPE, SOURCE)
    assert latest is not None and latest.tx == pinned and latest.text_len == len(text)
    assert latest.canonical_text_hash == blake3.blake3(text).digest() == content_hash(text)
    assert await store.reads.text(SCOPE, SOURCE, pinned, None, None) == text
    assert await _count(store, "blob_chunks") == 3
    job = await store.jobs.get(SCOPE, JOB.job_id)
    assert job is not None and job.state == "completed"
    assert [e.transition for e in job.events].count("partial") == 3
    assert job.events[-1].detail is not None
    assert job.events[-1].detail.startswith(f"version={pinned} nodes_added=")
    assert await store.versions.stream_base(JOB.job_id, lease, "w1") == 0


async def test_blocklist_at_the_pin(store: StorageEngine) -> None:
    await store.jobs.enqueue(SCOPE, JOB, now_us=NOW, dedup=False)
    lease = await _lease(store)
    await _block(store, RAW)
    out = await store.versions.apply_stream_part(
        SCOPE, VERSION, _proj(b"abc", 0), _part(lease, 0, 0)
    )
    assert out.erased and out.node_ids == []
    job = await store.jobs.get(SCOPE, JOB.job_id)
    assert job is not None and job.state == "dead" and job.failure_reason is not None
    assert job.failure_reason.startswith("erased")
    assert await _count(store, "source_versions") == 0


async def test_blocklist_at_the_finalize_purges_the_stream(store: StorageEngine) -> None:
    await store.jobs.enqueue(SCOPE, JOB, now_us=NOW, dedup=False)
    lease = await _lease(store)
    await store.versions.apply_stream_part(SCOPE, VERSION, _proj(b"secret ", 0), _part(lease, 0, 0))
    await _block(store, content_hash(b"secret text"))
    out = await store.versions.apply_stream_part(
        SCOPE, VERSION, _proj(b"text", 7), _part(lease, 1, 7, partial=False)
    )
    assert out.erased and not out.finalized
    for table in ("source_versions", "blob_chunks", "nodes", "span_rows", "node_labels"):
        assert await _count(store, table) == 0, table
    job = await store.jobs.get(SCOPE, JOB.job_id)
    assert job is not None and job.state == "dead"


async def test_another_workers_stream_is_abandoned_and_a_single_shot_is_out_of_sequence(
    store: StorageEngine,
) -> None:
    await store.jobs.enqueue(SCOPE, JOB, now_us=NOW, dedup=False)
    lease = await _lease(store)
    first = await store.versions.apply_stream_part(
        SCOPE, VERSION, _proj(b"one", 0), _part(lease, 0, 0)
    )
    single = JobCompletion(lease, NOW + 5, b"{}", (), "w1")
    with pytest.raises(OutOfSync, match="a stream is open: expected seq 1, got 0"):
        await store.versions.commit(
            SCOPE, VERSION, _proj(b"whole", 0), dedup=Dedup.SUBMIT, completion=single
        )
    # Another worker id under the same lease: the checkpoint is not its stream.
    with pytest.raises(OutOfSync, match="expected seq 0, got 1"):
        await store.versions.apply_stream_part(
            SCOPE, VERSION, _proj(b"two", 3), _part(lease, 1, 3, worker="w2")
        )
    second = await store.versions.apply_stream_part(
        SCOPE, VERSION, _proj(b"two", 0), _part(lease, 0, 0, worker="w2")
    )
    assert second.source_version_tx > first.source_version_tx and not second.replay
    job = await store.jobs.get(SCOPE, JOB.job_id)
    assert job is not None
    assert [e.transition for e in job.events].count("stream_abandoned") == 1
    assert await store.versions.stream_base(JOB.job_id, lease, "w1") == 0
    # A single shot of the first worker abandons the second's stream and commits.
    done = await store.versions.commit(
        SCOPE, VERSION, _proj(b"whole", 0), dedup=Dedup.SUBMIT, completion=single
    )
    assert done.source_version_tx is not None and not done.deduplicated
    latest = await store.versions.latest(SCOPE, SOURCE)
    assert latest is not None and latest.tx == done.source_version_tx
    assert await store.reads.text(SCOPE, SOURCE, latest.tx, None, None) == b"whole"
    job = await store.jobs.get(SCOPE, JOB.job_id)
    assert job is not None and job.state == "completed"
    assert [e.transition for e in job.events].count("stream_abandoned") == 2
