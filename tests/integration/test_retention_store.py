"""Job retention on the store directly, on both engines (:mod:`telha.storage.retention.passes`):
ended jobs older than the cutoff go with their events, subscriptions, deliveries and the raw
uploads nothing else names; jobs a version names, recent ones and unfinished ones stay, and
so do raw bytes a live job or a version names and bytes a new upload has just refreshed; a
source's last job hands over to its newest remaining one, a source left with nothing
disappears; the counts are exact, a dry run counts the same and removes nothing, a second
pass finds nothing, and ``telha check`` passes afterwards."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from telha.check.runner import run_checks
from telha.config import JobsConfig
from telha.domain.ids import content_hash, new_id, now_us
from telha.domain.model import (
    BLOB_CHUNK,
    Dedup,
    JobCompletion,
    LeaseRef,
    NewJob,
    Scope,
    WebhookTarget,
)
from telha.domain.policy import FailureDecision, decide_failure
from telha.domain.webhooks import ALL_EVENTS
from telha.metrics import Metrics
from telha.retention.collector import Retention
from telha.storage.core.tx import Tx
from telha.storage.postgres import PostgresStore
from telha.storage.raw.chunks import store_chunks
from telha.storage.retention import passes as retention
from telha.storage.retention.passes import BlobCandidate, ended_jobs_sql, remove_blob
from telha.storage.sqlite import SqliteStore
from telha.storage.sqlite.dialect import SQLITE
from tests.integration.test_storage_contract import one_node, version

pytestmark = pytest.mark.anyio

SCOPE = Scope("retention", "org")
DAY = 86_400_000_000
NOW = now_us()
OLD = NOW - 40 * DAY
RECENT = NOW - DAY
CUTOFF = NOW - 30 * DAY
LEASE_US = 60_000_000

Store = SqliteStore | PostgresStore


def _bytes(size: int, seed: int) -> bytes:
    return (bytes((seed + i) % 251 for i in range(251)) * (size // 251 + 1))[:size]


def _job(source: bytes, name: str, raw: bytes | None = None, *, hook: bool = False) -> NewJob:
    return NewJob(
        new_id(), "ingest:text", "text", source, content_hash(raw) if raw else None,
        b'{"p": 1}', name=name, webhook=WebhookTarget("http://127.0.0.1:9/h", ALL_EVENTS)
        if hook else None,
    )  # fmt: skip


def _dead(kind: str, attempts: int) -> FailureDecision:
    return decide_failure(
        "corrupt_input", attempts_before=attempts, max_attempts=3, now_us=OLD,
        base_ms=1000, max_s=10.0, rng=random.Random(0),
    )  # fmt: skip


async def _leased(store: Store, job: NewJob, at: int) -> LeaseRef:
    await store.jobs.enqueue(SCOPE, job, now_us=at, dedup=False)
    got = await store.jobs.lease_next(
        ["text"], scope=SCOPE, worker_id="w", now_us=at, lease_us=LEASE_US
    )
    assert got is not None and got.job_id == job.job_id
    return LeaseRef(got.job_id, got.lease_generation)


async def _age_blob(tx: Tx, digest: bytes, at: int) -> None:
    await tx.execute("UPDATE raw_blobs SET created_at = ? WHERE content_hash = ?", at, digest)


async def _stored(store: Store, tmp_path: Path, data: bytes, *, at: int = OLD) -> bytes:
    """Store ``data`` as raw bytes written at ``at``; its digest."""
    digest = content_hash(data)
    path = tmp_path / f"upload-{digest.hex()[:8]}"
    path.write_bytes(data)
    await store.raw.put(SCOPE, digest, path, len(data))
    await store.transaction("age", _age_blob, digest, at)
    return digest


async def _events(store: Store, job_id: bytes) -> int:
    job = await store.jobs.get(SCOPE, job_id)
    assert job is not None
    return len(job.events)


async def _blob_rows(tx: Tx, digest: bytes) -> tuple[int, int]:
    blobs = await tx.fetchone("SELECT count(*) FROM raw_blobs WHERE content_hash = ?", digest)
    chunks = await tx.fetchone("SELECT count(*) FROM raw_chunks WHERE content_hash = ?", digest)
    assert blobs is not None and chunks is not None
    return int(blobs[0]), int(chunks[0])


async def _job_rows(tx: Tx, job_id: bytes) -> dict[str, int]:
    out = {}
    for table in ("jobs", "job_events", "job_webhooks", "webhook_deliveries"):
        row = await tx.fetchone(f"SELECT count(*) FROM {table} WHERE job_id = ?", job_id)
        assert row is not None
        out[table] = int(row[0])
    return out


@dataclass
class World:
    """What the scenario made: the jobs and blobs expected to go, and those to stay."""

    gone_jobs: list[bytes] = field(default_factory=list)
    kept_jobs: list[bytes] = field(default_factory=list)
    gone_blobs: dict[bytes, int] = field(default_factory=dict)
    kept_blobs: list[bytes] = field(default_factory=list)
    events: int = 0
    sources: dict[str, bytes] = field(default_factory=dict)
    version_tx: int = 0
    only_job: bytes = b""
    kept_last: bytes = b""


async def _world(store: Store, tmp_path: Path) -> World:
    w = World()
    # A: an upload (raw bytes, 5 MiB and a bit) whose only job was cancelled long ago, with
    # its own webhook and the delivery its cancel wrote.
    upload = _bytes(5 * BLOB_CHUNK + 7, 1)
    a_src = new_id()
    x = await _stored(store, tmp_path, upload)
    a1 = _job(a_src, "a.csv", upload, hook=True)
    await store.jobs.enqueue(SCOPE, a1, now_us=OLD, dedup=False)
    await store.jobs.cancel(SCOPE, a1.job_id, now_us=OLD)
    assert await store.webhooks.pending_deliveries([a1.job_id]) == 1
    w.gone_jobs.append(a1.job_id)
    w.gone_blobs[x] = len(upload)
    w.only_job = a1.job_id
    w.sources["a"] = a_src
    # B: a version written by an old job (kept: the version names it), then a later job of
    # the same source that died (its last job: removed, the role goes back to b1).
    b_src = new_id()
    b1 = _job(b_src, "b.txt")
    outcome = await store.versions.commit(
        SCOPE, version(b_src, b"bee", job=b1.job_id), one_node("bee text"), dedup=Dedup.SUBMIT,
        completion=JobCompletion(await _leased(store, b1, OLD), OLD + 1, b"{}"),
    )  # fmt: skip
    assert outcome.source_version_tx is not None
    w.version_tx = outcome.source_version_tx
    b2 = _job(b_src, "b.txt")
    await store.jobs.fail(
        await _leased(store, b2, OLD + 2), "corrupt_input", "bad", now_us=OLD + 3, decide=_dead
    )
    w.kept_jobs.append(b1.job_id)
    w.gone_jobs.append(b2.job_id)
    w.kept_last = b1.job_id
    w.sources["b"] = b_src
    # C: cancelled yesterday: recent, kept.
    c1 = _job(new_id(), "c.txt")
    await store.jobs.enqueue(SCOPE, c1, now_us=RECENT, dedup=False)
    await store.jobs.cancel(SCOPE, c1.job_id, now_us=RECENT)
    w.kept_jobs.append(c1.job_id)
    # D: raw bytes an old dead job and a pending job (another source) share: the dead job
    # goes, the bytes stay for the pending one.
    shared = _bytes(BLOB_CHUNK + 3, 2)
    y = await _stored(store, tmp_path, shared)
    d1 = _job(new_id(), "d.csv", shared)
    await store.jobs.fail(
        await _leased(store, d1, OLD), "corrupt_input", "bad", now_us=OLD + 1, decide=_dead
    )
    d2 = _job(new_id(), "e.csv", shared)
    await store.jobs.enqueue(SCOPE, d2, now_us=OLD + 5, dedup=False)
    w.gone_jobs.append(d1.job_id)
    w.kept_jobs.append(d2.job_id)
    w.kept_blobs.append(y)
    # F: raw bytes a version names (no job: kept all the same).
    named = _bytes(2000, 3)
    z = await _stored(store, tmp_path, named)
    await store.versions.commit(
        SCOPE, version(new_id(), named), one_node("named"), dedup=Dedup.SUBMIT
    )
    w.kept_blobs.append(z)
    # Raw bytes nothing names (an upload whose request died before its job), and a store
    # cut short: both go.
    orphan = _bytes(3000, 4)
    w.gone_blobs[await _stored(store, tmp_path, orphan)] = len(orphan)
    cut = _bytes(BLOB_CHUNK * 2, 5)
    cut_digest = content_hash(cut)
    await store.transaction(
        "store raw bytes", store_chunks, SCOPE, cut_digest, len(cut), 0, [cut[:BLOB_CHUNK]], False
    )
    await store.transaction("age", _age_blob, cut_digest, OLD)
    w.gone_blobs[cut_digest] = len(cut)
    # Old raw bytes a new upload has just found stored (and refreshed): kept.
    again = _bytes(4000, 6)
    r = await _stored(store, tmp_path, again)
    await store.raw.put(SCOPE, r, tmp_path / f"upload-{r.hex()[:8]}", len(again))
    w.kept_blobs.append(r)
    w.events = sum([await _events(store, j) for j in w.gone_jobs])
    return w


async def test_old_ended_jobs_and_unnamed_raw_bytes_go(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = await _world(store, tmp_path)
    # Two chunks per transaction: the 6-chunk upload takes three.
    monkeypatch.setattr(retention, "CHUNKS_PER_TX", 2)
    dry = await store.retention.remove_ended(before_us=CUTOFF, dry_run=True)
    expected = (len(w.gone_jobs), w.events, len(w.gone_blobs), sum(w.gone_blobs.values()))
    assert (dry.jobs, dry.events, dry.raw_blobs, dry.raw_bytes) == expected
    assert dry.payload_bytes == len(b'{"p": 1}') * len(w.gone_jobs)
    for j in w.gone_jobs:  # a dry run removes nothing
        assert await store.jobs.get(SCOPE, j) is not None

    done = await store.retention.remove_ended(before_us=CUTOFF, batch=2)
    assert (done.jobs, done.events, done.raw_blobs, done.raw_bytes) == expected
    assert done.bytes_freed == dry.bytes_freed == sum(w.gone_blobs.values()) + dry.payload_bytes
    assert done.after is not None
    for j in w.gone_jobs:
        assert await store.jobs.get(SCOPE, j) is None
        assert await store.read(_job_rows, j) == {
            "jobs": 0, "job_events": 0, "job_webhooks": 0, "webhook_deliveries": 0,
        }  # fmt: skip
    for j in w.kept_jobs:
        kept = await store.jobs.get(SCOPE, j)
        assert kept is not None and kept.events
    for digest in w.gone_blobs:
        assert await store.read(_blob_rows, digest) == (0, 0)
    for digest in w.kept_blobs:
        assert await store.raw.has(SCOPE, digest)
    assert await store.webhooks.delivery_times() == (None, None)

    # A's only job is gone: the source is as if never ingested.
    assert await store.listings.source(SCOPE, w.sources["a"]) is None
    # B's last job died and went: its version's job is its last job again.
    b = await store.listings.source(SCOPE, w.sources["b"])
    assert b is not None and b.state == "current" and b.version_count == 1
    assert (b.last_job_id, b.last_job_state) == (w.kept_last, "completed")
    [v] = await store.reads.versions(SCOPE, w.sources["b"])
    assert v.tx == w.version_tx and v.job_id == w.kept_last
    assert await store.reads.text(SCOPE, w.sources["b"], v.tx, None, None) == b"bee text"

    # Nothing more to remove, from the start or from where the pass stopped.
    assert await store.retention.remove_ended(before_us=CUTOFF, after=done.after) == (
        retention.RetentionResult(after=done.after)
    )
    again = await store.retention.remove_ended(before_us=CUTOFF)
    assert (again.jobs, again.raw_blobs, again.bytes_freed) == (0, 0, 0)
    report = await run_checks(store)
    assert report.total == 0, [v.line() for v in report.violations]


async def test_a_cutoff_before_everything_removes_nothing(store: Store, tmp_path: Path) -> None:
    w = await _world(store, tmp_path)
    done = await store.retention.remove_ended(before_us=OLD - DAY)
    assert (done.jobs, done.events, done.raw_blobs, done.bytes_freed) == (0, 0, 0, 0)
    for j in w.gone_jobs + w.kept_jobs:
        assert await store.jobs.get(SCOPE, j) is not None
    for digest in w.kept_blobs:
        assert await store.raw.has(SCOPE, digest)


async def test_bytes_stored_again_mid_removal_survive(store: Store, tmp_path: Path) -> None:
    """A blob half removed (marked incomplete, its last chunks gone) that a new upload
    stores again is whole and readable, and retention leaves it alone from then on."""
    data = _bytes(4 * BLOB_CHUNK + 1, 7)
    digest = await _stored(store, tmp_path, data)
    sid = await store.read(lambda tx: tx.known_scope_id(SCOPE))
    blob = BlobCandidate(sid, digest, len(data))
    first = await store.transaction("gc", remove_blob, blob, CUTOFF, 2)
    assert first is False and not await store.raw.has(SCOPE, digest)
    await store.raw.put(SCOPE, digest, tmp_path / f"upload-{digest.hex()[:8]}", len(data))
    assert await store.raw.has(SCOPE, digest)
    got = b"".join([d async for _, d, _ in store.raw.read(SCOPE, digest)])
    assert got == data
    assert await store.transaction("gc", remove_blob, blob, CUTOFF, 2) is None
    done = await store.retention.remove_ended(before_us=CUTOFF)
    assert done.raw_blobs == 0 and await store.raw.has(SCOPE, digest)


async def _plan(tx: Tx) -> list[str]:
    rows = await tx.fetchall(
        "EXPLAIN QUERY PLAN " + ended_jobs_sql(True, 1000, SQLITE), CUTOFF, OLD, OLD, b"\x00" * 16
    )
    return [str(r[-1]) for r in rows]


async def test_the_scan_of_ended_jobs_is_an_index_range(store: Store) -> None:
    """Each batch seeks into ``jobs_ended`` from where the last stopped (no scan, no sort);
    whether a version names a job is a primary-key or index probe."""
    if not isinstance(store, SqliteStore):
        pytest.skip("SQLite's query plan")
    plan = await store.read(_plan)
    assert plan[0] == "SEARCH j USING INDEX jobs_ended (updated_at>? AND updated_at<?)", plan
    assert not any("SCAN" in p or "TEMP B-TREE" in p for p in plan), plan


async def test_the_collector_counts_and_resumes(store: Store, tmp_path: Path) -> None:
    """The actor's pass (clock injected) removes and counts in ``/metrics``; the next pass
    starts where it stopped and finds nothing; ``retain_days = 0`` does nothing at all."""
    w = await _world(store, tmp_path)
    metrics = Metrics()
    off = Retention(store, JobsConfig(retain_days=0), metrics, clock=lambda: NOW)
    async with anyio.create_task_group() as tg:
        await tg.start(off.run)  # reports itself and ends: nothing to do
    assert all([await store.jobs.get(SCOPE, j) for j in w.gone_jobs])
    collector = Retention(store, JobsConfig(retain_days=30), metrics, clock=lambda: NOW)
    done = await collector.run_once()
    assert done.jobs == len(w.gone_jobs) and done.raw_blobs == len(w.gone_blobs)
    sample = metrics.registry.get_sample_value
    assert sample("telha_retention_bytes_freed_total") == done.bytes_freed
    assert sample("telha_retention_removed_total", {"what": "jobs"}) == done.jobs
    assert sample("telha_retention_removed_total", {"what": "events"}) == w.events
    again = await collector.run_once()
    assert (again.jobs, again.raw_blobs, again.after) == (0, 0, done.after)


async def test_two_collectors_at_once_remove_each_job_once(store: Store, tmp_path: Path) -> None:
    """Two passes at once (two replicas on PostgreSQL: disjoint rows, SKIP LOCKED) remove
    every job once between them, and fail nothing."""
    w = await _world(store, tmp_path)
    results: list[retention.RetentionResult] = []

    async def one() -> None:
        results.append(await store.retention.remove_ended(before_us=CUTOFF, batch=1))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert sum(r.jobs for r in results) == len(w.gone_jobs)
    assert sum(r.events for r in results) == w.events
    assert sum(r.raw_blobs for r in results) == len(w.gone_blobs)
    for j in w.gone_jobs:
        assert await store.jobs.get(SCOPE, j) is None
