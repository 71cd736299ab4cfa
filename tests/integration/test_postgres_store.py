"""The PostgreSQL engine directly, with two stores (two pools: what two replicas hold) on one
real database: migrations applied once when both open at once, transaction time unique and
increasing across them, a job never leased twice, dedup under concurrent commits of the same
bytes, the reaper in both at once, and driver errors typed as ``StorageError``; the one-call
lease and single-shot commit (``functions.sql``) and the cases they leave to the general
path; two stores committing versions of one source at once end with the later version
current. The supersede, shared-node, retire and superseded-stream cases run on both engines
(docs/architecture.md, "Versions and node identity")."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import replace

import anyio
import asyncpg
import pytest

from telha.domain.errors import StaleLease, StorageError
from telha.domain.ids import content_hash, new_id
from telha.domain.model import (
    CommitOutcome,
    Dedup,
    Direction,
    JobCompletion,
    LeaseRef,
    NewJob,
    NewVersion,
    NodeVersion,
    Scope,
    StreamPart,
)
from telha.domain.policy import FailureDecision, decide_loss
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx
from telha.storage.postgres import PostgresStore
from telha.storage.postgres.migrate import migrations
from telha.storage.versions.publish import RetireOutcome, retire
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
            out = await store.versions.commit(SCOPE, v, _proj(text), dedup=Dedup.CONTENT)
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
        outcomes.append(await store.versions.commit(SCOPE, v, _proj(b"same"), dedup=Dedup.CONTENT))

    async with anyio.create_task_group() as tg:
        for store in (a, b, a, b):
            tg.start_soon(commit, store)
    assert sorted(o.deduplicated for o in outcomes) == [False, True, True, True]
    assert len(await a.reads.versions(SCOPE, source)) == 1


async def test_no_job_leased_twice_and_reapers_at_once(
    two: tuple[PostgresStore, PostgresStore, str],
) -> None:
    a, b, _ = two
    now = 1_000_000_000_000
    jobs = [
        NewJob(new_id(), "ingest:text", "text", new_id(), new_id() * 2, b"{}") for _ in range(60)
    ]
    for job in jobs:
        await a.jobs.enqueue(SCOPE, job, now_us=now, dedup=True)
    leased: list[bytes] = []

    async def lease(store: PostgresStore, worker: str) -> None:
        while True:
            job = await store.jobs.lease_next(
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
            r[0].job_id for r in await store.jobs.reap_expired(now_us=now + 2_000, decide=decide)
        )

    async with anyio.create_task_group() as tg:
        for store in (a, b, a, b):
            tg.start_soon(reap, store)
    assert sorted(reaped) == sorted(j.job_id for j in jobs)  # each exactly once
    record = await a.jobs.get(SCOPE, jobs[0].job_id)
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
    """A lease passes over locked jobs: with the 20 oldest jobs locked by another
    transaction it still leases the oldest unlocked one, and it orders across formats."""
    a, _, dsn = two
    now = 1_000_000_000_000
    jobs = [
        NewJob(new_id(), f"ingest:{fmt}", fmt, new_id(), new_id() * 2, b"{}")
        for fmt in ["markdown"] + ["text"] * 24
    ]
    for i, job in enumerate(jobs):
        await a.jobs.enqueue(SCOPE, job, now_us=now + i, dedup=True)
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT job_id FROM jobs WHERE job_id = ANY($1::bytea[]) FOR UPDATE",
                [j.job_id for j in jobs[:21]],
            )
            got = await a.jobs.lease_next(
                ["markdown", "text"], scope=SCOPE, worker_id="w", now_us=now + 99, lease_us=1
            )
            assert got is not None and got.job_id == jobs[21].job_id
        got = await a.jobs.lease_next(
            ["text", "markdown"], scope=None, worker_id="w", now_us=now + 99, lease_us=1
        )
        assert got is not None and got.job_id == jobs[0].job_id  # the markdown job is oldest
    finally:
        await conn.close()
    for expected in (jobs[1], None):  # only jobs available at now + 1
        got = await a.jobs.lease_next(
            ["text"], scope=SCOPE, worker_id="w", now_us=now + 1, lease_us=1
        )
        assert (got.job_id if got is not None else None) == (
            expected.job_id if expected is not None else None
        )
    assert (
        await a.jobs.lease_next(["csv"], scope=None, worker_id="w", now_us=now, lease_us=1) is None
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
        await store.jobs.enqueue(SCOPE, job, now_us=now, dedup=False)
        held = await store.jobs.lease_next(
            ["text"], scope=SCOPE, worker_id="w", now_us=now, lease_us=10**9
        )
        assert held is not None and held.job_id == job.job_id
        version = NewVersion(source, "s.txt", "text", digest, len(text), "w", job.job_id)
        with pytest.raises(StaleLease):
            await store.versions.commit(
                SCOPE, version, proj, dedup=Dedup.SUBMIT,
                completion=JobCompletion(LeaseRef(job.job_id, held.lease_generation + 1), now),
            )  # fmt: skip
        # The third commit changes the explicit node's properties: a new version of it.
        third = replace(proj, nodes=[proj.nodes[0]._replace(properties_json=b'{"a":2}')])
        completion = JobCompletion(LeaseRef(job.job_id, held.lease_generation), now + i, b"{}")
        outcome = await store.versions.commit(
            SCOPE, replace(version, content_hash=new_id() * 2) if i == 2 else version,
            third if i == 2 else proj, dedup=Dedup.SUBMIT, completion=completion,
        )  # fmt: skip
        outcomes.append(outcome)
        record = await store.jobs.get(SCOPE, job.job_id)
        assert record is not None and record.state == "completed"
        assert record.events[-1].transition == "completed"
    assert [o.deduplicated for o in outcomes] == [False, True, False]
    assert outcomes[0].node_ids == outcomes[2].node_ids == [node]
    versions = await a.reads.versions(SCOPE, source)
    assert [v.tx for v in versions] == [
        outcomes[2].source_version_tx,
        outcomes[0].source_version_tx,
    ]
    current = await a.reads.node(SCOPE, node, None)
    assert current is not None and current.properties == {"a": 2}
    assert current.tx_from == outcomes[2].source_version_tx


# -- versions that supersede (docs/architecture.md, "Versions and node identity") ----------

PERSON = b"P" * 16


def _doc(text: bytes, paragraphs: list[bytes], *, person: bool) -> Projection:
    """A DOCUMENT over ``text`` with one PARA per entry of ``paragraphs`` (each found in
    ``text``); with ``person``, a worker-id PERSON on the first paragraph's span that the
    first paragraph MENTIONS."""
    spans = [SpanOut(0, len(text), "body")]
    nodes = [NodeOut(("DOCUMENT",), b"{}", (0,))]
    edges = []
    for p in paragraphs:
        start = text.index(p)
        spans.append(SpanOut(start, start + len(p), "para"))
        nodes.append(NodeOut(("PARA",), b"{}", (len(spans) - 1,)))
        edges.append(EdgeOut("HAS", 0, len(nodes) - 1))
    if person:
        nodes.append(NodeOut(("PERSON",), b'{"name":"Ada"}', (1,), PERSON))
        edges.append(EdgeOut("MENTIONS", 1, len(nodes) - 1))
    return Projection(text, spans, nodes, edges)


async def _commit(store: StorageEngine, source: bytes, proj: Projection) -> CommitOutcome:
    v = NewVersion(source, "d.md", "markdown", content_hash(proj.canonical), 1, "t")
    return await store.versions.commit(SCOPE, v, proj, dedup=Dedup.CONTENT)


async def _current(store: StorageEngine, source: bytes) -> dict[bytes, NodeVersion]:
    found = await store.reads.nodes(SCOPE, label=None, source_id=source, limit=1000, after=None)
    return {n.node_id: n for n in found}


async def _retire(tx: Tx, source: bytes, reason: str) -> RetireOutcome:
    return await retire(tx, await tx.scope_id(SCOPE), source, reason)


async def test_supersede_shared_node_retire_on_both_engines(store: StorageEngine) -> None:
    """The publish and the retire of telha.storage.versions.publish on each engine: a re-ingest
    keeps the ids of what did not change, closes what went (readable ``asOf`` before), keeps
    a node another source's edge touches as a new version with that source's spans, and a
    retire closes the rest; the same bytes afterwards are a new version, not a duplicate."""
    a, b = new_id(), new_id()
    v1 = await _commit(store, a, _doc(b"alpha. beta.", [b"alpha.", b"beta."], person=True))
    doc, alpha, beta, person = v1.node_ids
    assert person == PERSON
    vb = await _commit(store, b, _doc(b"alpha! gamma.", [b"alpha!"], person=True))
    assert PERSON in vb.node_ids  # B asserts the same PERSON: its span row links it
    v2 = await _commit(store, a, _doc(b"alpha. delta.", [b"alpha."], person=False))
    assert v2.changes is not None and v2.source_version_tx is not None
    assert (v2.changes.added, v2.changes.unchanged, v2.changes.removed) == (0, 2, 1)
    assert v2.node_ids == [doc, alpha]
    assert set(await _current(store, a)) == {doc, alpha}
    old = await store.reads.node(SCOPE, beta, as_of=v1.source_version_tx)
    assert old is not None and old.tx_to == v2.source_version_tx
    assert await store.reads.node(SCOPE, beta, as_of=None) is None
    # PERSON left A's graph but B's MENTIONS edge touches it: a new version with B's spans.
    shared = await store.reads.node(SCOPE, PERSON, as_of=None)
    assert shared is not None and shared.tx_from == v2.source_version_tx
    assert [(p.source_id, p.source_version_tx, p.start, p.end) for p in shared.provenance] == [
        (b, vb.source_version_tx, 0, 6)
    ]
    edges = await store.reads.edges(SCOPE, PERSON, Direction.IN)
    assert len(edges) == 1  # B's; A's MENTIONS was closed with v2
    retired = await store.transaction("retire source", _retire, a, "gone")
    assert (retired.version_tx, retired.nodes_closed, retired.reason) == (
        v2.source_version_tx, 2, "gone"
    )  # fmt: skip
    again = await store.transaction("retire source", _retire, a, "other")
    assert again == retired
    assert await _current(store, a) == {}
    before = await store.reads.node(SCOPE, alpha, as_of=retired.tx - 1)
    assert before is not None and before.tx_from == v2.source_version_tx
    assert await store.reads.node(SCOPE, PERSON, as_of=None) is not None  # B still has it
    v3 = await _commit(store, a, _doc(b"alpha. delta.", [b"alpha."], person=False))
    assert not v3.deduplicated and v3.node_ids[:1] != [doc]  # nothing current to match
    assert set(await _current(store, a)) == set(v3.node_ids)


async def _submit(
    store: PostgresStore, dsn: str, source: bytes, text: bytes, out: list[CommitOutcome]
) -> None:
    """A job's single-shot submission of ``text`` as a version of ``source``."""
    now = 1_000_000_000_000
    proj = _doc(text, [text.split(b" common")[0], b"common."], person=False)
    job = NewJob(new_id(), "ingest:markdown", "markdown", source, new_id() * 2, b"{}")
    await store.jobs.enqueue(SCOPE, job, now_us=now, dedup=False)
    # Leased directly: a lease of the queue's oldest job could be another task's.
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "UPDATE jobs SET state = 'leased', lease_generation = 1 WHERE job_id = $1", job.job_id
        )
    finally:
        await conn.close()
    v = NewVersion(source, "r.md", "markdown", new_id() * 2, 1, "w", job.job_id)
    completion = JobCompletion(LeaseRef(job.job_id, 1), now, b"{}")
    out.append(
        await store.versions.commit(SCOPE, v, proj, dedup=Dedup.SUBMIT, completion=completion)
    )


async def _upload(
    store: PostgresStore, dsn: str, source: bytes, text: bytes, out: list[CommitOutcome]
) -> None:
    """An upload of ``text`` as a version of ``source``."""
    proj = _doc(text, [text.split(b" common")[0], b"common."], person=False)
    out.append(await _commit(store, source, proj))


async def test_replicas_committing_one_source_end_with_the_later_version(
    two: tuple[PostgresStore, PostgresStore, str],
) -> None:
    """Two stores (two replicas) commit versions of one source at once — job submissions
    (the one-call commit first, then the general path once a version exists) and uploads —
    in several rounds: each round ends with exactly one current version, the one with the
    latest tx, whose nodes are all of the source's current nodes (none of an older version
    stays current), and every version is published with the unchanged DOCUMENT's id kept."""
    a, b, dsn = two
    for round_ in range(4):
        source = new_id()
        texts = [f"round {round_} text {i}. common.".encode() for i in range(6)]
        outcomes: list[CommitOutcome] = []
        async with anyio.create_task_group() as tg:
            for i, text in enumerate(texts):
                commit = _submit if i < 4 else _upload
                tg.start_soon(commit, (a, b)[i % 2], dsn, source, text, outcomes)
        txs = sorted(o.source_version_tx for o in outcomes if o.source_version_tx is not None)
        assert len(txs) == len(texts)
        latest = txs[-1]
        versions = await a.reads.versions(SCOPE, source)
        assert [v.tx for v in versions] == txs[::-1]  # every one published
        current = await _current(b, source)
        winner = next(o for o in outcomes if o.source_version_tx == latest)
        assert set(current) == set(winner.node_ids)
        assert {n.tx_from for n in current.values()} == {latest}
        assert len({o.node_ids[0] for o in outcomes}) == 1  # the DOCUMENT kept its id
        conn = await asyncpg.connect(dsn)
        try:
            # An edge an older version wrote stays open when every later version asserted
            # it again, marked with the latest (docs/architecture.md, "Kept edges").
            open_txs = await conn.fetch(
                "SELECT DISTINCT tx_from FROM nodes WHERE source_id = $1 AND tx_to IS NULL"
                " UNION SELECT DISTINCT CASE WHEN seen_tx IS NULL THEN tx_from ELSE seen_tx END"
                " FROM edges WHERE source_id = $1 AND tx_to IS NULL",
                source,
            )
            published = await conn.fetch(
                "SELECT tx, published_tx FROM source_versions WHERE source_id = $1", source
            )
        finally:
            await conn.close()
        assert [r[0] for r in open_txs] == [latest]
        assert all(r["published_tx"] == r["tx"] for r in published)


async def test_stream_finalized_after_a_later_version_publishes_superseded(
    store: StorageEngine,
) -> None:
    """A stream pinned before a single shot of its source finalizes after it: the single
    shot's version stays current (the later tx) and no row of the stream is ever seen; a
    stream abandoned afterwards leaves that version current and untouched."""
    source = new_id()
    v1 = await _commit(store, source, _doc(b"alpha. beta.", [b"alpha.", b"beta."], person=False))
    now = 1_000_000_000_000

    async def leased() -> LeaseRef:
        job = NewJob(new_id(), "ingest:markdown", "markdown", source, new_id() * 2, b"{}")
        await store.jobs.enqueue(SCOPE, job, now_us=now, dedup=False)
        held = await store.jobs.lease_next(
            ["markdown"], scope=SCOPE, worker_id="w", now_us=now, lease_us=10**9
        )
        assert held is not None and held.job_id == job.job_id
        return LeaseRef(job.job_id, held.lease_generation)

    def part(lease: LeaseRef, seq: int, partial: bool, base: int = 0) -> StreamPart:
        return StreamPart(lease, "w", seq, partial, base, now + seq, 10**9, stats=b"{}")

    lease = await leased()
    streamed = NewVersion(source, "d.md", "markdown", new_id() * 2, 13, "w", lease.job_id)
    first = Projection(
        b"alpha. ",
        [SpanOut(0, 7, "body"), SpanOut(0, 6, "para")],
        [NodeOut(("DOCUMENT",), b"{}", (0,)), NodeOut(("PARA",), b"{}", (1,))],
        [EdgeOut("HAS", 0, 1)],
    )
    pinned = await store.versions.apply_stream_part(SCOPE, streamed, first, part(lease, 0, True))
    assert pinned.node_ids == v1.node_ids[:2]  # DOCUMENT and "alpha." matched v1's
    v2 = await _commit(store, source, _doc(b"alpha. gamma.", [b"alpha.", b"gamma."], person=False))
    assert v2.source_version_tx is not None and v2.source_version_tx > pinned.source_version_tx
    last = Projection(
        b"omega.", [SpanOut(7, 13, "para")], [NodeOut(("PARA",), b"{}", (0,))], base=7
    )
    done = await store.versions.apply_stream_part(SCOPE, streamed, last, part(lease, 1, False, 7))
    assert done.finalized
    current = await _current(store, source)
    assert set(current) == set(v2.node_ids)
    assert {n.tx_from for n in current.values()} == {v2.source_version_tx}
    versions = await store.reads.versions(SCOPE, source)
    assert [v.tx for v in versions] == [
        v2.source_version_tx, pinned.source_version_tx, v1.source_version_tx
    ]  # fmt: skip
    record = await store.jobs.get(SCOPE, lease.job_id)
    assert record is not None and record.state == "completed"
    for t in (pinned.source_version_tx, v2.source_version_tx - 1, v2.source_version_tx):
        seen = await store.reads.nodes(
            SCOPE, label=None, source_id=source, limit=100, after=None, as_of=t
        )
        assert {n.tx_from for n in seen} <= {v1.source_version_tx, v2.source_version_tx}
    # A later stream abandoned (the job released): v2 stays exactly as it was.
    lease = await leased()
    again = NewVersion(source, "d.md", "markdown", new_id() * 2, 7, "w", lease.job_id)
    await store.versions.apply_stream_part(SCOPE, again, first, part(lease, 0, True))
    assert await store.jobs.release(lease, now_us=now + 9, detail="shutdown")
    assert await _current(store, source) == current
