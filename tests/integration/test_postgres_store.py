"""The PostgreSQL engine directly, with two stores (two pools: what two replicas hold) on one
real database: migrations applied once when both open at once, transaction time unique and
increasing across them, a job never leased twice, dedup under concurrent commits of the same
bytes, the reaper in both at once, and driver errors typed as ``StorageError``; the one-call
lease and single-shot commit (migration 0005) and the cases they leave to the general path."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import replace

import anyio
import asyncpg
import pytest

from telha.domain.errors import StaleLease, StorageError
from telha.domain.ids import new_id
from telha.domain.model import Dedup, JobCompletion, LeaseRef, NewJob, NewVersion, Scope
from telha.domain.policy import FailureDecision, decide_loss
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.storage.postgres import PostgresStore
from telha.storage.postgres.migrate import migrations
from tests.support.pg import create_database, require_engine

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")


@pytest.fixture
async def two() -> AsyncIterator[tuple[PostgresStore, PostgresStore, str]]:
    require_engine("postgres")
    dsn = create_database()
    a, b = PostgresStore(dsn, pool_size=4), PostgresStore(dsn, pool_size=4)
    async with anyio.create_task_group() as tg:  # both migrate the empty database at once
        tg.start_soon(a.open)
        tg.start_soon(b.open)
    try:
        yield a, b, dsn
    finally:
        await a.close()
        await b.close()


def _proj(text: bytes) -> Projection:
    return Projection(text, [SpanOut(0, len(text), "body")], [NodeOut(("DOC",), b"{}", (0,))])


async def test_migrations_applied_once(two: tuple[PostgresStore, PostgresStore, str]) -> None:
    conn = await asyncpg.connect(two[2])
    try:
        rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
    finally:
        await conn.close()
    assert [r[0] for r in rows] == [n for n, _, _ in migrations()]


async def test_tx_time_strictly_increasing_across_stores(
    two: tuple[PostgresStore, PostgresStore, str],
) -> None:
    a, b, _ = two
    seen: dict[str, list[int]] = {"a": [], "b": []}

    async def commits(name: str, store: PostgresStore) -> None:
        for i in range(40):
            text = f"{name} {i}".encode()
            v = NewVersion(new_id(), f"{name}-{i}", "json", new_id() * 2, len(text), "t")
            out = await store.commit_version(SCOPE, v, _proj(text), dedup=Dedup.CONTENT)
            assert out.source_version_tx is not None
            seen[name].append(out.source_version_tx)

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(commits, "a", a)
            tg.start_soon(commits, "b", b)
    every = seen["a"] + seen["b"]
    assert len(set(every)) == len(every) == 160


async def test_same_bytes_committed_through_both_make_one_version(
    two: tuple[PostgresStore, PostgresStore, str],
) -> None:
    a, b, _ = two
    source, digest = new_id(), new_id() * 2
    outcomes = []

    async def commit(store: PostgresStore) -> None:
        v = NewVersion(source, "same.json", "json", digest, 4, "t")
        outcomes.append(await store.commit_version(SCOPE, v, _proj(b"same"), dedup=Dedup.CONTENT))

    async with anyio.create_task_group() as tg:
        for store in (a, b, a, b):
            tg.start_soon(commit, store)
    assert sorted(o.deduplicated for o in outcomes) == [False, True, True, True]
    assert len(await a.source_versions(SCOPE, source)) == 1


async def test_no_job_leased_twice_and_reapers_at_once(
    two: tuple[PostgresStore, PostgresStore, str],
) -> None:
    a, b, _ = two
    now = 1_000_000_000_000
    jobs = [
        NewJob(new_id(), "ingest:text", "text", new_id(), new_id() * 2, b"{}") for _ in range(60)
    ]
    for job in jobs:
        await a.enqueue_job(SCOPE, job, now_us=now, dedup=True)
    leased: list[bytes] = []

    async def lease(store: PostgresStore, worker: str) -> None:
        while True:
            job = await store.lease_next_job(
                ["text"], scope=None, worker_id=worker, now_us=now, lease_us=1_000
            )
            if job is None:
                return
            leased.append(job.job_id)

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(lease, a, f"a{i}")
            tg.start_soon(lease, b, f"b{i}")
    assert sorted(leased) == sorted(j.job_id for j in jobs)

    def decide(kind: str, attempts: int, losses: int) -> FailureDecision:
        return decide_loss(
            kind, attempts_before=attempts, losses_before=losses, max_attempts=5, max_losses=3,
            now_us=now + 2_000, base_ms=0, max_s=0.0, rng=random.Random(0),
        )  # fmt: skip

    reaped: list[bytes] = []

    async def reap(store: PostgresStore) -> None:
        reaped.extend(
            r[0].job_id for r in await store.reap_expired(now_us=now + 2_000, decide=decide)
        )

    async with anyio.create_task_group() as tg:
        for store in (a, b, a, b):
            tg.start_soon(reap, store)
    assert sorted(reaped) == sorted(j.job_id for j in jobs)  # each exactly once
    record = await a.get_job(SCOPE, jobs[0].job_id)
    assert record is not None and record.state == "pending" and record.attempts == 1
    assert [e.transition for e in record.events] == ["enqueued", "leased", "lease_expired"]


async def test_driver_errors_are_storage_errors() -> None:
    require_engine("postgres")
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/none", pool_size=2)
    with pytest.raises(StorageError) as info:
        await store.open()
    assert info.value.__cause__ is not None


async def test_lease_looks_past_locked_candidates_in_age_order(
    two: tuple[PostgresStore, PostgresStore, str],
) -> None:
    """telha_lease reads 16 candidates per format: with the 20 oldest jobs locked by another
    transaction it still leases the oldest unlocked one, and it orders across formats."""
    a, _, dsn = two
    now = 1_000_000_000_000
    jobs = [
        NewJob(new_id(), f"ingest:{fmt}", fmt, new_id(), new_id() * 2, b"{}")
        for fmt in ["markdown"] + ["text"] * 24
    ]
    for i, job in enumerate(jobs):
        await a.enqueue_job(SCOPE, job, now_us=now + i, dedup=True)
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT job_id FROM jobs WHERE job_id = ANY($1::bytea[]) FOR UPDATE",
                [j.job_id for j in jobs[:21]],
            )
            got = await a.lease_next_job(
                ["markdown", "text"], scope=SCOPE, worker_id="w", now_us=now + 99, lease_us=1
            )
            assert got is not None and got.job_id == jobs[21].job_id
        got = await a.lease_next_job(
            ["text", "markdown"], scope=None, worker_id="w", now_us=now + 99, lease_us=1
        )
        assert got is not None and got.job_id == jobs[0].job_id  # the markdown job is oldest
    finally:
        await conn.close()
    for expected in (jobs[1], None):  # only jobs available at now + 1
        got = await a.lease_next_job(
            ["text"], scope=SCOPE, worker_id="w", now_us=now + 1, lease_us=1
        )
        assert (got.job_id if got is not None else None) == (
            expected.job_id if expected is not None else None
        )
    assert (
        await a.lease_next_job(["csv"], scope=None, worker_id="w", now_us=now, lease_us=1) is None
    )


async def test_single_shot_commits_and_what_takes_the_general_path(
    two: tuple[PostgresStore, PostgresStore, str],
) -> None:
    """telha_commit_single writes a submission's version with the job's completion; a stale
    generation is refused; an existing explicit node id (the upsert ladder) and a duplicate of
    another job's bytes go through the general transaction, with the same outcomes."""
    a, b, _ = two
    now = 1_000_000_000_000
    source, digest, node = new_id(), new_id() * 2, new_id()
    text = b"same text"
    proj = Projection(text, [SpanOut(0, 4, "body")], [NodeOut(("DOC",), b'{"a":1}', (0,), node)])
    outcomes = []
    for i, store in enumerate((a, b, a)):
        job = NewJob(new_id(), "ingest:text", "text", source, digest, b"{}")
        await store.enqueue_job(SCOPE, job, now_us=now, dedup=False)
        held = await store.lease_next_job(
            ["text"], scope=SCOPE, worker_id="w", now_us=now, lease_us=10**9
        )
        assert held is not None and held.job_id == job.job_id
        version = NewVersion(source, "s.txt", "text", digest, len(text), "w", job.job_id)
        with pytest.raises(StaleLease):
            await store.commit_version(
                SCOPE, version, proj, dedup=Dedup.SUBMIT,
                completion=JobCompletion(LeaseRef(job.job_id, held.lease_generation + 1), now),
            )  # fmt: skip
        # The third commit changes the explicit node's properties: a new version of it.
        third = replace(proj, nodes=[proj.nodes[0]._replace(properties_json=b'{"a":2}')])
        completion = JobCompletion(LeaseRef(job.job_id, held.lease_generation), now + i, b"{}")
        outcome = await store.commit_version(
            SCOPE, replace(version, content_hash=new_id() * 2) if i == 2 else version,
            third if i == 2 else proj, dedup=Dedup.SUBMIT, completion=completion,
        )  # fmt: skip
        outcomes.append(outcome)
        record = await store.get_job(SCOPE, job.job_id)
        assert record is not None and record.state == "completed"
        assert record.events[-1].transition == "completed"
    assert [o.deduplicated for o in outcomes] == [False, True, False]
    assert outcomes[0].node_ids == outcomes[2].node_ids == [node]
    versions = await a.source_versions(SCOPE, source)
    assert [v.tx for v in versions] == [
        outcomes[2].source_version_tx,
        outcomes[0].source_version_tx,
    ]
    current = await a.get_node(SCOPE, node, None)
    assert current is not None and current.properties == {"a": 2}
    assert current.tx_from == outcomes[2].source_version_tx
