"""The Storage contract (telha/storage/protocol.py), on both engines, in-process.

Every operation of :class:`telha.storage.protocol.Storage` is called at least once against a
real store: an SQLite file in ``tmp_path`` and a fresh PostgreSQL database per test. The
store is opened through :func:`telha.storage.open_store`, the one place an engine is chosen,
so these tests know the Protocol only. Times handed to job operations are a fixed clock the
tests move; transaction times come from the store.
"""

from __future__ import annotations

import base64
import random
import uuid
from dataclasses import replace
from pathlib import Path

import anyio
import blake3
import msgspec
import pytest

from telha.config import Config, StorageConfig
from telha.domain.erasure import (
    ERASE_FORMAT,
    ERASE_KIND,
    LEFTOVER_CHECKS,
    STEPS,
    ErasePayload,
)
from telha.domain.errors import (
    ContentErased,
    InvalidStream,
    NotFound,
    OutOfSync,
    RequestError,
    StaleLease,
)
from telha.domain.ids import content_hash, new_id
from telha.domain.model import (
    BLOB_CHUNK,
    CommitOutcome,
    Dedup,
    Direction,
    JobCompletion,
    JobRecord,
    LeaseRef,
    NewJob,
    NewVersion,
    Scope,
    StreamPart,
)
from telha.domain.policy import Decide, DecideLoss, FailureDecision, decide_failure, decide_loss
from telha.domain.projection import AmbiguityOut, EdgeOut, NodeOut, Projection, SpanOut
from telha.storage import StorageEngine, open_store
from telha.storage.protocol import ALL_FORMATS
from tests.support.pg import create_database

pytestmark = pytest.mark.anyio

SCOPE = Scope("contract-tenant", "org")
OTHER = Scope("contract-other", "org")
#: The clock job operations are given (µs); leases last LEASE_US.
NOW = 1_800_000_000_000_000
LEASE_US = 60_000_000
MAX_ATTEMPTS = 3


# -- builders ---------------------------------------------------------------------------------


def version(
    source: bytes, raw: bytes, *, name: str = "doc.txt", fmt: str = "text", job: bytes | None = None
) -> NewVersion:
    """A version of ``source`` whose raw bytes are ``raw``."""
    return NewVersion(source, name, fmt, content_hash(raw), len(raw), "test-worker", job)


def one_node(text: str, label: str = "DOC", props: bytes = b"{}") -> Projection:
    """``text`` as one span and one node over all of it."""
    data = text.encode()
    return Projection(data, [SpanOut(0, len(data), "body")], [NodeOut((label,), props, (0,))])


def ingest_job(source: bytes, raw: bytes | None, fmt: str = "text") -> NewJob:
    return NewJob(new_id(), f"ingest:{fmt}", fmt, source, content_hash(raw) if raw else None, b"{}")


def failing(now: int) -> Decide:
    """The queue's retry policy at ``now`` (seeded)."""

    def decide(kind: str, attempts: int) -> FailureDecision:
        return decide_failure(
            kind, attempts_before=attempts, max_attempts=MAX_ATTEMPTS, now_us=now,
            base_ms=1000, max_s=10.0, rng=random.Random(0),
        )  # fmt: skip

    return decide


def losing(now: int, max_losses: int = 3) -> DecideLoss:
    """The queue's loss policy at ``now``."""

    def decide(kind: str, attempts: int, losses: int) -> FailureDecision:
        return decide_loss(
            kind, attempts_before=attempts, losses_before=losses, max_attempts=MAX_ATTEMPTS,
            max_losses=max_losses, now_us=now, base_ms=1000, max_s=10.0, rng=random.Random(0),
        )  # fmt: skip

    return decide


async def lease(
    store: StorageEngine, fmt: str = "text", *, now: int = NOW, worker: str = "w"
) -> JobRecord:
    job = await store.jobs.lease_next(
        [fmt], scope=SCOPE, worker_id=worker, now_us=now, lease_us=LEASE_US
    )
    assert job is not None, f"no {fmt} job to lease"
    return job


def held(job: JobRecord) -> LeaseRef:
    return LeaseRef(job.job_id, job.lease_generation)


async def transitions(store: StorageEngine, job_id: bytes) -> list[str]:
    job = await store.jobs.get(SCOPE, job_id)
    assert job is not None
    return [e.transition for e in job.events]


# -- API keys ---------------------------------------------------------------------------------


async def test_api_keys_resolve_to_their_scope(store: StorageEngine) -> None:
    key_hash = blake3.blake3(b"a key").digest()
    assert await store.keys.scope_for(key_hash) is None
    await store.keys.add(SCOPE, "key-1", key_hash)
    await store.keys.add(OTHER, "key-2", blake3.blake3(b"another key").digest())
    assert await store.keys.scope_for(key_hash) == SCOPE
    assert await store.keys.scope_for(blake3.blake3(b"another key").digest()) == OTHER
    assert await store.keys.scope_for(blake3.blake3(b"unknown").digest()) is None


# -- versions and reads -----------------------------------------------------------------------

#: Three lines, the second with two-byte characters (byte 13 is inside "é").
LINES = ["first line\n", "s\u00e9cond l\u00edne\n", "third\n"]
DATA = "".join(LINES).encode()
#: ``[start, end)`` of each line in DATA.
LINE_SPANS = [
    (len("".join(LINES[:i]).encode()), len("".join(LINES[: i + 1]).encode())) for i in range(3)
]


def rich_projection(explicit: bytes, dangling: bytes, props: bytes = b'{"n":1}') -> Projection:
    """Spans over each line, a DOC node over everything, a LINE node per line (the second
    with the explicit id ``explicit`` and an ambiguity), DOC -HAS-> LINE edges and one edge
    to the node ``dangling`` that does not exist."""
    spans = [SpanOut(0, len(DATA), "body")] + [SpanOut(a, b, "line") for a, b in LINE_SPANS]
    nodes = [
        NodeOut(("DOC",), b'{"title":"t"}', (0,)),
        NodeOut(("LINE",), b'{"n":0}', (1,)),
        NodeOut(("LINE", "SECOND"), props, (2,), explicit, 1_000, 2_000),
        NodeOut(("LINE",), b'{"n":2}', (3,)),
    ]
    edges = [EdgeOut("HAS", 0, i) for i in (1, 2, 3)] + [
        EdgeOut("SEE_ALSO", 2, None, b'{"w":1}', to_id=dangling)
    ]
    ambiguity = AmbiguityOut(
        2, "date_order", b'[{"label":"a","validFrom":1000,"validTo":2000,"span":null}]',
        0.5, 0.75, "low",
    )  # fmt: skip
    return Projection(DATA, spans, nodes, edges, ambiguities=[ambiguity])


async def test_commit_then_every_read(store: StorageEngine) -> None:
    source, explicit, dangling = new_id(), new_id(), new_id()
    raw = b"raw bytes of the first version"
    assert await store.versions.latest(SCOPE, source) is None
    assert await store.reads.versions(SCOPE, source) == []
    assert not await store.reads.has_source(SCOPE, source)

    first = await store.versions.commit(
        SCOPE, version(source, raw), rich_projection(explicit, dangling), dedup=Dedup.CONTENT
    )
    assert not first.deduplicated and not first.erased and first.refused_children == ()
    assert first.source_version_tx is not None
    tx1 = first.source_version_tx
    assert len(first.node_ids) == 4 and first.node_ids[2] == explicit
    assert len(first.edge_ids) == 4 and len(set(first.edge_ids)) == 4
    doc, line0, _, line2 = first.node_ids

    latest = await store.versions.latest(SCOPE, source)
    assert latest is not None
    assert (latest.source_id, latest.tx, latest.name, latest.format) == (
        source,
        tx1,
        "doc.txt",
        "text",
    )
    assert latest.content_hash == content_hash(raw) and latest.size == len(raw)
    assert latest.canonical_text_hash == blake3.blake3(DATA).digest()
    assert latest.text_len == len(DATA) and latest.worker == "test-worker"
    assert latest.job_id is None and latest.erased_at is None
    assert await store.reads.has_source(SCOPE, source)
    assert not await store.reads.has_source(OTHER, source)
    assert await store.versions.latest(OTHER, source) is None

    # The slice API: whole text, a slice, bounds on boundaries; the bad ranges.
    assert await store.reads.text(SCOPE, source, tx1, None, None) == DATA
    assert await store.reads.text(SCOPE, source, tx1, 11, 18) == "sécond".encode()
    assert await store.reads.text(SCOPE, source, tx1, 5, 5) == b""
    assert await store.reads.text(SCOPE, source, tx1, len(DATA), None) == b""
    # An end past the text reads what exists (docs/rest-api.md, "Reading text").
    assert await store.reads.text(SCOPE, source, tx1, 0, len(DATA) + 1) == DATA
    for start, end in ((5, 4), (len(DATA) + 1, None), (13, 20), (11, 13)):
        with pytest.raises(RequestError):
            await store.reads.text(SCOPE, source, tx1, start, end)
    with pytest.raises(NotFound):
        await store.reads.text(SCOPE, source, tx1 + 1, None, None)
    with pytest.raises(NotFound):
        await store.reads.text(OTHER, source, tx1, None, None)

    # The span reverse index, in document order, with the nodes each span produced.
    spans = await store.reads.span_rows(SCOPE, source, tx1)
    assert [(s.start, s.end, s.kind) for s in spans] == sorted(
        [(0, len(DATA), "body")] + [(a, b, "line") for a, b in LINE_SPANS]
    )
    assert [s.linked_nodes for s in spans] == [[line0], [doc], [explicit], [line2]]
    with pytest.raises(NotFound):
        await store.reads.span_rows(OTHER, source, tx1)

    # Nodes: labels, properties, provenance, valid time, the ambiguity.
    node = await store.reads.node(SCOPE, explicit, None)
    assert node is not None
    assert node.labels == ["LINE", "SECOND"] and node.properties == {"n": 1}
    assert (node.tx_from, node.tx_to, node.valid_from, node.valid_to) == (tx1, None, 1_000, 2_000)
    assert [(p.source_id, p.source_version_tx, p.start, p.end) for p in node.provenance] == [
        (source, tx1, *LINE_SPANS[1])
    ]
    [amb] = node.ambiguities
    assert (amb.kind, amb.detector_confidence, amb.applied_candidate_confidence) == (
        "date_order", 0.5, 0.75,
    )  # fmt: skip
    assert amb.severity_hint == "low" and amb.candidates[0]["validFrom"] == 1000
    assert await store.reads.node(OTHER, explicit, None) is None
    assert await store.reads.node(SCOPE, new_id(), None) is None

    # Edges: the dangling one is left out; directions.
    out = await store.reads.edges(SCOPE, doc, Direction.OUT)
    assert sorted((e.type, e.to_id) for e in out) == sorted(
        ("HAS", n) for n in (line0, explicit, line2)
    )
    assert all(e.from_id == doc for e in out)
    assert await store.reads.edges(SCOPE, doc, Direction.IN) == []
    into = await store.reads.edges(SCOPE, explicit, Direction.IN)
    assert [(e.type, e.from_id, e.properties) for e in into] == [("HAS", doc, {})]
    assert await store.reads.edges(SCOPE, explicit, Direction.OUT) == []  # SEE_ALSO dangles
    both = await store.reads.edges(SCOPE, explicit, Direction.BOTH)
    assert [e.edge_id for e in both] == [e.edge_id for e in into]
    assert await store.reads.edges(OTHER, doc, Direction.BOTH) == []

    # A second version changes the explicit node: a new node version; asOf reads the old one.
    raw2 = b"raw bytes of the second version"
    second = await store.versions.commit(
        SCOPE, version(source, raw2), rich_projection(explicit, dangling, b'{"n":2}'),
        dedup=Dedup.CONTENT,
    )  # fmt: skip
    tx2 = second.source_version_tx
    assert tx2 is not None and tx2 > tx1
    assert [v.tx for v in await store.reads.versions(SCOPE, source)] == [tx2, tx1]
    now_node = await store.reads.node(SCOPE, explicit, None)
    assert now_node is not None and now_node.properties == {"n": 2} and now_node.tx_from == tx2
    then = await store.reads.node(SCOPE, explicit, tx1)
    assert then is not None and then.properties == {"n": 1} and then.tx_to == tx2
    assert await store.reads.node(SCOPE, explicit, tx1 - 1) is None
    # Nodes without an explicit id match the first version's (same labels and span text):
    # they keep their ids as new versions at tx2, and the first version's are closed
    # (docs/architecture.md, "Versions and node identity").
    assert second.node_ids == first.node_ids
    now_doc = await store.reads.node(SCOPE, doc, None)
    assert now_doc is not None and now_doc.tx_from == tx2 and now_doc.tx_to is None
    old_doc = await store.reads.node(SCOPE, doc, tx1)
    assert old_doc is not None and old_doc.tx_from == tx1 and old_doc.tx_to == tx2
    assert set(second.edge_ids) == set(first.edge_ids)  # edges between matched nodes too

    # Listing: current nodes only, ordered by id, paged with ``after``; label and source.
    current = [n.node_id for n in await store.reads.nodes(
        SCOPE, label=None, source_id=None, limit=100, after=None
    )]  # fmt: skip
    assert current == sorted(current)
    assert set(current) == set(first.node_ids)
    assert len(current) == 4  # the second version's graph only
    paged: list[bytes] = []
    after = None
    while True:
        page = await store.reads.nodes(SCOPE, label=None, source_id=source, limit=3, after=after)
        paged += [n.node_id for n in page]
        if len(page) < 3:
            break
        after = page[-1].node_id
    assert paged == current
    lines = await store.reads.nodes(SCOPE, label="LINE", source_id=source, limit=100, after=None)
    assert len(lines) == 3 and all("LINE" in n.labels for n in lines)
    seconds = await store.reads.nodes(SCOPE, label="SECOND", source_id=None, limit=100, after=None)
    assert [n.node_id for n in seconds] == [explicit]
    assert (
        await store.reads.nodes(SCOPE, label="DOC", source_id=new_id(), limit=5, after=None) == []
    )
    assert await store.reads.nodes(OTHER, label=None, source_id=None, limit=5, after=None) == []


async def test_commit_dedup_modes(store: StorageEngine) -> None:
    source = new_id()
    raw = b"the same raw bytes"
    proj = one_node("same text\n")
    first = await store.versions.commit(SCOPE, version(source, raw), proj, dedup=Dedup.CONTENT)
    assert first.source_version_tx is not None

    # Request level: the same raw bytes again write nothing, whatever the text.
    again = await store.versions.commit(
        SCOPE, version(source, raw), one_node("other text\n"), dedup=Dedup.CONTENT
    )
    assert again == CommitOutcome(True, None, [], [])
    assert len(await store.reads.versions(SCOPE, source)) == 1
    # Another scope is another world: the same bytes are new there.
    there = await store.versions.commit(OTHER, version(source, raw), proj, dedup=Dedup.CONTENT)
    assert not there.deduplicated
    # Dedup.NONE never deduplicates.
    forced = await store.versions.commit(SCOPE, version(source, raw), proj, dedup=Dedup.NONE)
    assert not forced.deduplicated and forced.source_version_tx is not None
    assert len(await store.reads.versions(SCOPE, source)) == 2

    # Submit time, through held jobs: same bytes and text from another job → deduplicated
    # (the job still completes); a retry of the job that wrote the latest → re-applied;
    # same bytes with other text → a new version.
    outcomes: list[tuple[bytes, bool]] = []
    for text in ("job text\n", "job text\n", "job text\n", "changed text\n"):
        enqueued = await store.jobs.enqueue(SCOPE, ingest_job(source, raw), now_us=NOW, dedup=False)
        assert enqueued.job_id is not None
        job = await lease(store)
        assert job.job_id == enqueued.job_id
        writer = job.job_id if len(outcomes) != 2 else outcomes[0][0]  # the third: a retry
        outcome = await store.versions.commit(
            SCOPE, version(source, raw, job=writer), one_node(text), dedup=Dedup.SUBMIT,
            completion=JobCompletion(held(job), NOW, b'{"s":1}'),
        )  # fmt: skip
        record = await store.jobs.get(SCOPE, job.job_id)
        assert record is not None and record.state == "completed" and record.stats is not None
        assert msgspec.json.decode(record.stats)["s"] == 1  # the worker's stats are kept
        outcomes.append((job.job_id, outcome.deduplicated))
    assert [d for _, d in outcomes] == [False, True, False, False]
    versions = await store.reads.versions(SCOPE, source)
    assert len(versions) == 5
    assert versions[0].canonical_text_hash == blake3.blake3(b"changed text\n").digest()
    assert versions[1].job_id == outcomes[0][0]


async def test_job_lifecycle_dedup_heartbeat_fail_release_complete(store: StorageEngine) -> None:
    source, raw = new_id(), b"payload bytes"
    first = ingest_job(source, raw)
    assert await store.jobs.next_available_at(["text"], SCOPE) is None
    out = await store.jobs.enqueue(SCOPE, first, now_us=NOW, dedup=True)
    assert (out.deduplicated, out.job_id, out.erased) == (False, first.job_id, False)
    # The same (source, hash) while the first job is pending: that job's id, nothing new.
    dup = await store.jobs.enqueue(SCOPE, ingest_job(source, raw), now_us=NOW + 1, dedup=True)
    assert (dup.deduplicated, dup.job_id) == (True, first.job_id)
    assert await store.jobs.next_available_at(["text", "csv"], SCOPE) == NOW
    assert await store.jobs.next_available_at(["text"], OTHER) is None
    assert await store.jobs.next_available_at(["csv"]) is None
    assert await store.jobs.active_counts() == {("ingest:text", "pending"): 1}

    job = await lease(store, worker="w1")
    assert (job.job_id, job.state, job.lease_generation) == (first.job_id, "leased", 1)
    assert job.lease_owner == "w1" and job.lease_deadline == NOW + LEASE_US
    assert job.scope == SCOPE and job.payload == b"{}" and job.content_hash == content_hash(raw)
    assert (
        await store.jobs.lease_next(["text"], scope=None, worker_id="w", now_us=NOW, lease_us=1)
        is None
    )
    assert await store.jobs.active_counts() == {("ingest:text", "leased"): 1}
    # Still active while leased: deduplicated against it.
    dup = await store.jobs.enqueue(SCOPE, ingest_job(source, raw), now_us=NOW + 2, dedup=True)
    assert (dup.deduplicated, dup.job_id) == (True, first.job_id)
    # Without dedup a second job is enqueued all the same.
    extra = ingest_job(new_id(), b"other")
    assert (await store.jobs.enqueue(SCOPE, extra, now_us=NOW, dedup=False)).job_id == extra.job_id

    # Heartbeats extend the current lease only.
    stale = LeaseRef(job.job_id, job.lease_generation - 1)
    assert await store.jobs.heartbeat([stale], now_us=NOW + 10, lease_us=LEASE_US) == []
    unchanged = await store.jobs.get(SCOPE, job.job_id, events=False)
    assert unchanged is not None and unchanged.lease_deadline == NOW + LEASE_US
    assert await store.jobs.heartbeat([held(job)], now_us=NOW + 10, lease_us=LEASE_US) == [
        job.job_id
    ]
    assert await store.jobs.heartbeat([], now_us=NOW + 10, lease_us=LEASE_US) == []
    beat = await store.jobs.get(SCOPE, job.job_id, events=False)
    assert beat is not None and beat.lease_deadline == NOW + 10 + LEASE_US and beat.events == ()

    # A stale failure is refused and writes nothing; a current one retries with backoff.
    with pytest.raises(StaleLease):
        await store.jobs.fail(stale, "transient", "boom", now_us=NOW + 20, decide=failing(NOW + 20))
    failed = await store.jobs.fail(
        held(job), "transient", "transient: boom", now_us=NOW + 20, decide=failing(NOW + 20)
    )
    assert (failed.state, failed.attempts, failed.failure_reason) == (
        "pending",
        1,
        "transient: boom",
    )
    assert NOW + 20 + 500_000 <= failed.available_at <= NOW + 20 + 1_000_000
    assert failed.lease_owner is None and failed.lease_deadline is None
    assert (
        await store.jobs.lease_next(
            ["text"], scope=SCOPE, worker_id="w", now_us=NOW + 21, lease_us=LEASE_US
        )
        is not None
    )  # the extra job, available at once
    again = await lease(store, now=failed.available_at, worker="w2")
    assert (again.job_id, again.lease_generation, again.attempts) == (first.job_id, 2, 1)

    # Release: back to pending at once, the attempt not counted; a second release is stale.
    at = failed.available_at + 1
    assert await store.jobs.release(held(again), now_us=at, detail="shutdown")
    assert not await store.jobs.release(held(again), now_us=at, detail="shutdown")
    released = await store.jobs.get(SCOPE, first.job_id)
    assert released is not None and (released.state, released.attempts) == ("pending", 1)
    assert released.available_at == at

    # Completion under a stale generation is refused; under the current one it completes the
    # job and enqueues its children (request-level dedup applies to them).
    third = await lease(store, now=at)
    child_raw = b"an attachment"
    children = tuple(ingest_job(new_id(), child_raw, "csv") for _ in range(2))
    v = version(source, raw, job=first.job_id)
    with pytest.raises(StaleLease):
        await store.versions.commit(
            SCOPE, v, one_node("x\n"), dedup=Dedup.SUBMIT,
            completion=JobCompletion(held(again), at, children=children),
        )  # fmt: skip
    done = await store.versions.commit(
        SCOPE, v, one_node("x\n"), dedup=Dedup.SUBMIT,
        completion=JobCompletion(held(third), at, b'{"rows":1}', children[:1]),
    )  # fmt: skip
    assert not done.deduplicated and done.source_version_tx is not None
    record = await store.jobs.get(SCOPE, first.job_id)
    assert record is not None and record.state == "completed" and record.stats is not None
    assert msgspec.json.decode(record.stats) == {
        "rows": 1, "nodes_added": 1, "nodes_removed": 0, "nodes_changed": 0, "nodes_unchanged": 0,
        "children": 1,
    }  # fmt: skip
    assert [e.transition for e in record.events] == [
        "enqueued", "leased", "retried", "leased", "released", "leased", "completed",
    ]  # fmt: skip
    assert record.events[2].detail == "transient: boom"
    child = await store.jobs.get(SCOPE, children[0].job_id)
    assert child is not None and child.state == "pending" and child.format == "csv"
    assert child.events[0].detail == f"parent={uuid.UUID(bytes=first.job_id)}"
    assert await store.jobs.get(SCOPE, children[1].job_id) is None
    assert await store.versions.latest(SCOPE, source) is not None

    # After completion: the same bytes are the latest version's, so nothing is enqueued.
    after = await store.jobs.enqueue(SCOPE, ingest_job(source, raw), now_us=at, dedup=True)
    assert (after.deduplicated, after.job_id, after.erased) == (True, None, False)
    # get_job scoping: another scope sees nothing; no scope (the fleet) sees the job.
    assert await store.jobs.get(OTHER, first.job_id) is None
    fleet = await store.jobs.get(None, first.job_id, events=False)
    assert fleet is not None and fleet.scope == SCOPE
    assert await store.jobs.get(SCOPE, new_id()) is None


async def test_fetch_format_children_dedup_by_name(store: StorageEngine) -> None:
    """A ``web`` job carries no content hash (its bytes are fetched later): with dedup it
    matches an active job of the same source and format instead."""
    page = new_id()
    first = NewJob(new_id(), "ingest:web", "web", page, None, b'{"name":"http://127.0.0.1/page"}')
    assert (await store.jobs.enqueue(SCOPE, first, now_us=NOW, dedup=True)).job_id == first.job_id
    again = replace(first, job_id=new_id())
    out = await store.jobs.enqueue(SCOPE, again, now_us=NOW, dedup=True)
    assert (out.deduplicated, out.job_id) == (True, first.job_id)
    # Another format of the same source is another fetch; without dedup, always a new job.
    other_fmt = replace(first, job_id=new_id(), format="html", kind="ingest:html")
    assert not (await store.jobs.enqueue(SCOPE, other_fmt, now_us=NOW, dedup=True)).deduplicated
    forced = replace(first, job_id=new_id())
    assert (
        await store.jobs.enqueue(SCOPE, forced, now_us=NOW, dedup=False)
    ).job_id == forced.job_id
    # Once the job is over, the same page may be fetched again.
    job = await lease(store, "web")
    assert job.job_id == first.job_id
    await store.jobs.fail(held(job), "corrupt_input", "bad", now_us=NOW, decide=failing(NOW))
    await store.jobs.fail(  # the forced one too: no active web job of the page is left
        held(await lease(store, "web")), "corrupt_input", "bad", now_us=NOW, decide=failing(NOW)
    )
    later = replace(first, job_id=new_id())
    out = await store.jobs.enqueue(SCOPE, later, now_us=NOW, dedup=True)
    assert (out.deduplicated, out.job_id) == (False, later.job_id)

    # A crawl's children: a page linked twice by one parent, and a page whose fetch is
    # already queued, are fetched once.
    crawl = ingest_job(new_id(), b"<a href=...>")
    await store.jobs.enqueue(SCOPE, crawl, now_us=NOW, dedup=True)
    parent = await lease(store)
    other_page = new_id()
    kids = (
        NewJob(new_id(), "ingest:web", "web", other_page, None, b"{}"),
        NewJob(new_id(), "ingest:web", "web", other_page, None, b"{}"),
        NewJob(new_id(), "ingest:web", "web", page, None, b"{}"),  # `later` is pending
    )
    done = await store.versions.commit(
        SCOPE, version(crawl.source_id, b"<a href=...>", job=parent.job_id), one_node("links\n"),
        dedup=Dedup.SUBMIT, completion=JobCompletion(held(parent), NOW, children=kids),
    )  # fmt: skip
    assert not done.deduplicated and done.refused_children == ()
    enqueued = [await store.jobs.get(SCOPE, k.job_id, events=False) for k in kids]
    assert [j is not None for j in enqueued] == [True, False, False]
    assert await store.jobs.active_counts() == {
        ("ingest:web", "pending"): 2,  # `later` and the other page's
        ("ingest:html", "pending"): 1,
    }


async def test_deduplicated_completion_still_enqueues_its_fetch_children(
    store: StorageEngine,
) -> None:
    """A recrawl of an unchanged page: no version, but its links (fetch children, no content)
    are enqueued, each to be deduplicated on its own bytes; children carrying content came
    from the same bytes and are not. ``stats.children`` counts the jobs really enqueued."""
    raw = b"<a href=a.html>a</a>"
    index = new_id()
    await store.jobs.enqueue(SCOPE, ingest_job(index, raw, "web"), now_us=NOW, dedup=False)
    first = await lease(store, "web")
    await store.versions.commit(
        SCOPE, version(index, raw, job=first.job_id), one_node("a\n"), dedup=Dedup.SUBMIT,
        completion=JobCompletion(held(first), NOW),
    )  # fmt: skip
    kept = await store.versions.latest(SCOPE, index)
    assert kept is not None
    await store.jobs.enqueue(SCOPE, ingest_job(index, None, "web"), now_us=NOW, dedup=False)
    again = await lease(store, "web")
    linked = new_id()
    fetch = NewJob(new_id(), "ingest:web", "web", linked, None, b'{"name":"http://x/a.html"}')
    twice = replace(fetch, job_id=new_id())  # the same page linked twice: one job
    attachment = ingest_job(new_id(), b"bytes of a file", "csv")
    done = await store.versions.commit(
        SCOPE, version(index, raw, job=again.job_id), one_node("a\n"), dedup=Dedup.SUBMIT,
        completion=JobCompletion(
            held(again), NOW + 1, b'{"children": 3}', children=(fetch, twice, attachment)
        ),
    )  # fmt: skip
    assert done.deduplicated and done.source_version_tx is None
    record = await store.jobs.get(SCOPE, again.job_id)
    assert record is not None and record.state == "completed"
    assert record.events[-1].detail == "deduplicated"
    assert record.stats is not None and msgspec.json.decode(record.stats) == {"children": 1}
    child = await store.jobs.get(SCOPE, fetch.job_id)
    assert child is not None and child.state == "pending"
    assert await store.jobs.get(SCOPE, twice.job_id) is None
    assert await store.jobs.get(SCOPE, attachment.job_id) is None
    assert await store.versions.latest(SCOPE, index) == kept  # no new version


async def test_reap_expired_and_lose_jobs(store: StorageEngine) -> None:
    jobs = [ingest_job(new_id(), f"job {i}".encode()) for i in range(3)]
    for i, job in enumerate(jobs):
        await store.jobs.enqueue(SCOPE, job, now_us=NOW + i, dedup=True)
    leased = [await lease(store, now=NOW + 10) for _ in jobs]
    assert [j.job_id for j in leased] == [j.job_id for j in jobs]  # oldest first

    # Nothing has expired yet at the deadline itself.
    assert await store.jobs.reap_expired(now_us=NOW + 10 + LEASE_US, decide=losing(NOW)) == []
    late = NOW + 11 + LEASE_US
    await store.jobs.heartbeat([held(leased[2])], now_us=NOW + 20, lease_us=LEASE_US)
    reaped = await store.jobs.reap_expired(now_us=late, decide=losing(late))
    assert sorted((j.job_id, state) for j, state in reaped) == sorted(
        (j.job_id, "pending") for j in jobs[:2]
    )
    assert all(j.state == "leased" and j.lease_owner == "w" for j, _ in reaped)
    expired = await store.jobs.get(SCOPE, jobs[0].job_id)
    assert expired is not None and expired.attempts == 1 and expired.lease_generation == 1
    assert [e.transition for e in expired.events] == ["enqueued", "leased", "lease_expired"]
    assert expired.failure_reason is not None and expired.failure_reason.startswith("lease_expired")
    # The expired lease can no longer be heartbeaten, failed or completed.
    assert await store.jobs.heartbeat([held(leased[0])], now_us=late, lease_us=LEASE_US) == []
    with pytest.raises(StaleLease):
        await store.jobs.fail(held(leased[0]), "transient", "x", now_us=late, decide=failing(late))

    # Lost with its worker: the one still held gets worker_lost; a stale lease is skipped.
    lost = await store.jobs.lose(
        [held(leased[2]), held(leased[0])], now_us=late, detail="stream ended", decide=losing(late)
    )
    assert [(j.job_id, state) for j, state in lost] == [(jobs[2].job_id, "pending")]
    record = await store.jobs.get(SCOPE, jobs[2].job_id)
    assert record is not None and record.attempts == 1 and record.available_at == late
    assert [e.transition for e in record.events] == ["enqueued", "leased", "worker_lost"]
    assert await store.jobs.lose([], now_us=late, detail="x", decide=losing(late)) == []

    # The loss cap: a job lost twice with max_losses=2 is dead, reason resource_limit.
    again = await store.jobs.lease_next(
        ["text"], scope=None, worker_id="w", now_us=late, lease_us=LEASE_US
    )
    assert again is not None and again.job_id == jobs[2].job_id
    lost = await store.jobs.lose(
        [held(again)], now_us=late, detail="gone again", decide=losing(late, max_losses=2)
    )
    assert [state for _, state in lost] == ["dead"]
    dead = await store.jobs.get(SCOPE, jobs[2].job_id)
    assert dead is not None and dead.state == "dead"
    assert dead.failure_reason == "resource_limit: worker lost 2 times"
    assert [e.transition for e in dead.events][-2:] == ["worker_lost", "dead"]


async def test_fail_job_dead_letters_permanent_kinds_and_at_max_attempts(
    store: StorageEngine,
) -> None:
    permanent, retried = ingest_job(new_id(), b"p"), ingest_job(new_id(), b"r")
    for new in (permanent, retried):
        await store.jobs.enqueue(SCOPE, new, now_us=NOW, dedup=True)
    leased = await lease(store)
    assert leased.job_id == permanent.job_id
    dead = await store.jobs.fail(
        held(leased), "corrupt_input", "corrupt_input: bad", now_us=NOW, decide=failing(NOW)
    )
    assert (dead.state, dead.attempts) == ("dead", 1)
    assert (await transitions(store, permanent.job_id))[-1] == "dead"
    now = NOW
    states = []
    for _ in range(MAX_ATTEMPTS):
        job = await lease(store, now=now)
        assert job.job_id == retried.job_id
        after = await store.jobs.fail(held(job), "transient", "t", now_us=now, decide=failing(now))
        states.append(after.state)
        now = after.available_at
    assert states == ["pending"] * (MAX_ATTEMPTS - 1) + ["dead"]
    # Dead is terminal: nothing leases, extends, fails, releases, reaps or loses it again.
    gone = held(job)
    assert (
        await store.jobs.lease_next(["text"], scope=None, worker_id="w", now_us=now, lease_us=1)
        is None
    )
    assert await store.jobs.heartbeat([gone], now_us=now, lease_us=LEASE_US) == []
    with pytest.raises(StaleLease):
        await store.jobs.fail(gone, "transient", "t", now_us=now, decide=failing(now))
    assert not await store.jobs.release(gone, now_us=now, detail="x")
    assert await store.jobs.reap_expired(now_us=now + 10 * LEASE_US, decide=losing(now)) == []
    assert await store.jobs.lose([gone], now_us=now, detail="x", decide=losing(now)) == []
    for job_id in (permanent.job_id, retried.job_id):
        final = await store.jobs.get(SCOPE, job_id, events=False)
        assert final is not None and final.state == "dead"


async def test_heartbeat_batch_naming_one_job_under_two_generations(store: StorageEngine) -> None:
    """Only the lease held is extended: the stale generation's entry is not reported."""
    await store.jobs.enqueue(SCOPE, ingest_job(new_id(), b"hb"), now_us=NOW, dedup=True)
    job = await lease(store)
    stale = LeaseRef(job.job_id, job.lease_generation - 1)
    extended = await store.jobs.heartbeat([held(job), stale], now_us=NOW, lease_us=LEASE_US)
    assert extended == [job.job_id]


# -- streaming --------------------------------------------------------------------------------


def stream_part(rows: list[str], base: int, earlier: list[int] | None = None) -> Projection:
    """A partial: one ROW node per row, spans in global offsets from ``base``."""
    spans, nodes, at, text = [], [], base, b""
    for i, row in enumerate(rows):
        data = (row + "\n").encode()
        spans.append(SpanOut(at, at + len(data), "cell"))
        nodes.append(NodeOut(("ROW",), msgspec.json.encode({"row": row}), (i,)))
        at += len(data)
        text += data
    return Projection(text, spans, nodes, base=base, earlier_offsets=earlier or [])


async def test_stream_parts_replay_out_of_sync_invalid_and_finalize(store: StorageEngine) -> None:
    source, raw = new_id(), b"a,b\n1,2\n"
    job_in = ingest_job(source, raw, "csv")
    await store.jobs.enqueue(SCOPE, job_in, now_us=NOW, dedup=True)
    job = await lease(store, "csv")
    v = version(source, raw, name="big.csv", fmt="csv", job=job.job_id)

    def part(seq: int, base: int, *, partial: bool = True, lease_: LeaseRef | None = None,
             worker: str = "w") -> StreamPart:  # fmt: skip
        return StreamPart(lease_ or held(job), worker, seq, partial, base, NOW + seq, LEASE_US)

    assert await store.versions.stream_base(job.job_id, held(job), "w") == 0
    with pytest.raises(OutOfSync):  # a stream starts at seq 0
        await store.versions.apply_stream_part(SCOPE, v, stream_part(["x"], 0), part(1, 0))
    p0 = stream_part(["ééé", "row 1"], 0)
    first = await store.versions.apply_stream_part(SCOPE, v, p0, part(0, 0))
    assert len(first.node_ids) == 2 and not first.replay and not first.finalized
    assert first.lease_deadline == NOW + LEASE_US and first.source_version_tx > 0
    base = len(p0.canonical)
    assert await store.versions.stream_base(job.job_id, held(job), "w") == base
    assert await store.versions.stream_base(job.job_id, held(job), "another worker") == 0
    # Not readable before it is finalized.
    assert await store.versions.latest(SCOPE, source) is None

    # The same seq again is a replay: the same ids, nothing written.
    replay = await store.versions.apply_stream_part(SCOPE, v, p0, part(0, 0))
    assert replay.replay and replay.node_ids == first.node_ids
    p1 = stream_part(["row 2"], base)
    for bad_seq, bad_base in ((2, base), (1, base + 1), (1, base - 1)):
        with pytest.raises(OutOfSync):
            await store.versions.apply_stream_part(SCOPE, v, p1, part(bad_seq, bad_base))
    # A span into earlier text off a UTF-8 boundary (byte 1 is inside "é").
    off = Projection(b"", [SpanOut(1, 3, "cell")], [NodeOut(("ROW",), b"{}", (0,))], [],
                     base, [1, 3])  # fmt: skip
    with pytest.raises(InvalidStream):
        await store.versions.apply_stream_part(SCOPE, v, off, part(1, base))
    # A stale lease generation is refused.
    with pytest.raises(StaleLease):
        await store.versions.apply_stream_part(
            SCOPE, v, p1, part(1, base, lease_=LeaseRef(job.job_id, job.lease_generation + 1))
        )
    assert await store.versions.stream_base(job.job_id, held(job), "w") == base  # nothing moved

    second = await store.versions.apply_stream_part(SCOPE, v, p1, part(1, base))
    assert len(second.node_ids) == 1 and second.source_version_tx == first.source_version_tx
    base += len(p1.canonical)
    last = stream_part(["end"], base, earlier=[0, 2])  # earlier offsets on boundaries are fine
    final = await store.versions.apply_stream_part(SCOPE, v, last, part(2, base, partial=False))
    assert final.finalized and final.source_version_tx == first.source_version_tx
    text = p0.canonical + p1.canonical + last.canonical
    latest = await store.versions.latest(SCOPE, source)
    assert latest is not None and latest.tx == first.source_version_tx
    assert latest.canonical_text_hash == blake3.blake3(text).digest()
    assert latest.text_len == len(text)
    assert await store.reads.text(SCOPE, source, latest.tx, None, None) == text
    rows = await store.reads.nodes(SCOPE, label="ROW", source_id=source, limit=10, after=None)
    assert sorted(n.properties["row"] for n in rows) == ["end", "row 1", "row 2", "ééé"]
    record = await store.jobs.get(SCOPE, job.job_id)
    assert record is not None and record.state == "completed"
    assert [e.transition for e in record.events] == [
        "enqueued", "leased", "partial", "partial", "partial", "completed",
    ]  # fmt: skip
    with pytest.raises(StaleLease):  # the job is over
        await store.versions.apply_stream_part(SCOPE, v, p1, part(3, base))


async def test_stream_crossing_a_chunk_and_abandoned_on_release(store: StorageEngine) -> None:
    source, raw = new_id(), b"wide"
    await store.jobs.enqueue(SCOPE, ingest_job(source, raw, "csv"), now_us=NOW, dedup=True)
    job = await lease(store, "csv")
    v = version(source, raw, fmt="csv", job=job.job_id)
    row = "x" * 1000 + "é" * 100
    p0 = stream_part([row] * 700, 0)  # ~840 KB: two parts cross the 1 MiB chunk
    await store.versions.apply_stream_part(
        SCOPE, v, p0, StreamPart(held(job), "w", 0, True, 0, NOW, 1)
    )
    # Released mid-stream: the stream is abandoned, the next lease starts afresh at 0.
    assert await store.jobs.release(held(job), now_us=NOW, detail="shutdown")
    assert "stream_abandoned" in await transitions(store, job.job_id)
    job2 = await lease(store, "csv")
    assert await store.versions.stream_base(job2.job_id, held(job2), "w") == 0
    text = b""
    base = 0
    for seq in range(2):
        p = stream_part([row] * 700, base)
        await store.versions.apply_stream_part(
            SCOPE, v, p, StreamPart(held(job2), "w", seq, seq == 0, base, NOW, LEASE_US)
        )
        text += p.canonical
        base += len(p.canonical)
    latest = await store.versions.latest(SCOPE, source)
    assert latest is not None and latest.text_len == len(text) > BLOB_CHUNK
    lo = BLOB_CHUNK - BLOB_CHUNK % len((row + "\n").encode())  # a row start before the edge
    assert await store.reads.text(SCOPE, source, latest.tx, lo, lo + 3000) == text[lo : lo + 3000]
    rows = await store.reads.nodes(SCOPE, label="ROW", source_id=source, limit=5000, after=None)
    assert len(rows) == 1400  # the abandoned stream's 700 rows are visible at no time


# -- raw bytes --------------------------------------------------------------------------------


async def test_raw_bytes_store_has_read(store: StorageEngine, tmp_path: Path) -> None:
    data = bytes(range(256)) * (BLOB_CHUNK // 256) + b"tail of the upload"
    path = tmp_path / "upload.bin"
    path.write_bytes(data)
    digest = content_hash(data)
    assert not await store.raw.has(SCOPE, digest)
    with pytest.raises(NotFound):
        [c async for c in store.raw.read(SCOPE, digest)]
    await store.raw.put(SCOPE, digest, path, len(data))
    await store.raw.put(SCOPE, digest, path, len(data))  # stored already: a no-op
    assert await store.raw.has(SCOPE, digest)
    assert not await store.raw.has(OTHER, digest)
    chunks = [c async for c in store.raw.read(SCOPE, digest)]
    assert [(off, size) for off, _, size in chunks] == [(0, len(data)), (BLOB_CHUNK, len(data))]
    assert b"".join(d for _, d, _ in chunks) == data
    tail = [c async for c in store.raw.read(SCOPE, digest, BLOB_CHUNK - 3)]
    assert tail[0][0] == BLOB_CHUNK - 3 and b"".join(d for _, d, _ in tail) == data[-21:]
    assert b"".join([d async for _, d, _ in store.raw.read(SCOPE, digest, len(data))]) == b""
    with pytest.raises(NotFound):
        [c async for c in store.raw.read(SCOPE, digest, len(data) + 1)]
    with pytest.raises(NotFound):
        [c async for c in store.raw.read(OTHER, digest)]


# -- scan -------------------------------------------------------------------------------------


async def test_scan_sees_every_table(store: StorageEngine) -> None:
    source = new_id()
    out = await store.versions.commit(
        SCOPE, version(source, b"scan"), rich_projection(new_id(), new_id()), dedup=Dedup.CONTENT
    )
    job = ingest_job(new_id(), b"scan job")
    await store.jobs.enqueue(OTHER, job, now_us=NOW, dedup=True)
    async with store.scan() as scan:
        scopes = await scan.scopes()
        assert set(scopes.values()) >= {SCOPE, OTHER}
        sid = next(n for n, s in scopes.items() if s == SCOPE)
        tx = out.source_version_tx
        assert tx is not None
        versions = [v async for page in scan.versions(2) for v in page]
        assert [(v.scope, v.source_id, v.tx) for v in versions] == [(sid, source, tx)]
        assert versions[0].text_len == len(DATA) and versions[0].erased_at is None
        key = (sid, source, tx)
        assert await scan.versions_at([key, (sid, new_id(), 1)]) == versions
        assert await scan.final_content_hashes([(sid, source)]) == [
            (sid, source, content_hash(b"scan"))
        ]
        blob = versions[0].blob_id
        assert blob is not None
        assert await scan.chunks(sid, blob, 0, 5) == [(0, DATA)]
        nodes = [n async for page in scan.nodes(3) for n in page]
        assert sorted(n.node_id for n in nodes) == sorted(out.node_ids)
        assert all(n.tx_from == tx and n.tx_to is None for n in nodes)
        assert len(await scan.nodes_at([(sid, n.node_id, n.tx_from) for n in nodes])) == 4
        assert await scan.node_exists([(sid, out.node_ids[0]), (sid, new_id())]) == {
            (sid, out.node_ids[0])
        }
        spans = [s async for page in scan.span_rows(2) for s in page]
        assert [(s.start, s.end) for s in spans] == sorted([(0, len(DATA)), *LINE_SPANS])
        assert (
            len(await scan.span_rows_at([(sid, source, s.tx, s.start, s.end) for s in spans])) == 4
        )
        edges = await scan.edges_from_tx([(sid, tx)])
        assert sorted(e.edge_id for e in edges) == sorted(out.edge_ids)
        jobs = [j async for page in scan.jobs(10) for j in page]
        assert [(j.job_id, j.state, j.content_hash) for j in jobs] == [
            (job.job_id, "pending", job.content_hash)
        ]
        assert (await scan.jobs_at([job.job_id]))[0].job_id == job.job_id
        events = await scan.job_events([job.job_id])
        assert [(e.seq, e.transition) for e in events] == [(1, "enqueued")]


# -- erasure ----------------------------------------------------------------------------------


async def _erase(
    store: StorageEngine, source: bytes, *, now: int
) -> tuple[bytes, dict[str, dict[str, int]]]:
    """Enqueue an erasure of ``source`` and run every step; returns the erasure id and each
    step's counts."""
    payload = ErasePayload(
        source_id=str(uuid.UUID(bytes=source)), reason="right to erasure", principal="tester"
    )
    job = NewJob(new_id(), ERASE_KIND, ERASE_FORMAT, source, None, msgspec.json.encode(payload))
    await store.erasure.enqueue(SCOPE, job, payload, now_us=now)
    leased = await store.jobs.lease_next(
        [ERASE_FORMAT], scope=None, worker_id="core:eraser", now_us=now, lease_us=LEASE_US
    )
    assert leased is not None and leased.job_id == job.job_id and leased.kind == ERASE_KIND
    with pytest.raises(ValueError):
        await store.erasure.step(held(leased), "no-such-step", now_us=now)
    with pytest.raises(StaleLease):
        await store.erasure.step(LeaseRef(job.job_id, 99), "mark", now_us=now)
    counts = {}
    for step in STEPS:
        counts[step] = await store.erasure.step(held(leased), step, now_us=now)
        if step != "finish":  # a recorded step is not run again: the same counts
            assert await store.erasure.step(held(leased), step, now_us=now) == counts[step]
    with pytest.raises(StaleLease):  # finished: the job is completed, no longer held
        await store.erasure.step(held(leased), "finish", now_us=now)
    return job.job_id, counts


async def test_erasure_runs_every_step_and_blocklists(store: StorageEngine, tmp_path: Path) -> None:
    source, raw = new_id(), b"raw bytes with personal data"
    # The version is written by a job whose payload carries the bytes inline.
    inline = msgspec.json.encode(
        {"name": "doc.txt", "content_b64": base64.b64encode(raw).decode(), "size": len(raw)}
    )
    writer = replace(ingest_job(source, raw), payload=inline)
    await store.jobs.enqueue(SCOPE, writer, now_us=NOW, dedup=True)
    job = await lease(store)
    made = await store.versions.commit(
        SCOPE, version(source, raw, job=job.job_id), rich_projection(new_id(), new_id()),
        dedup=Dedup.SUBMIT, completion=JobCompletion(held(job), NOW),
    )  # fmt: skip
    tx = made.source_version_tx
    assert tx is not None
    # The same raw bytes uploaded, and a queued job of the source holding them inline.
    upload = tmp_path / "raw.bin"
    upload.write_bytes(raw)
    await store.raw.put(SCOPE, content_hash(raw), upload, len(raw))
    pending = NewJob(new_id(), "ingest:text", "text", source, content_hash(b"next"),
                     b'{"name":"doc.txt","content_b64":"bmV4dA==","size":4}')  # fmt: skip
    await store.jobs.enqueue(SCOPE, pending, now_us=NOW, dedup=True)
    # Another scope's identical bytes are not touched.
    there = await store.versions.commit(
        OTHER, version(source, raw), one_node("x\n"), dedup=Dedup.CONTENT
    )
    assert await store.erasure.leftovers() == {name: 0 for name, _, _ in LEFTOVER_CHECKS}

    erasure_id, counts = await _erase(store, source, now=NOW + 1)
    assert counts["nodes"]["hidden"] == 4 and counts["nodes"].get("trimmed", 0) == 0
    assert counts["spans"]["span_rows"] == 4 and counts["nodes"]["edges"] == 4
    assert counts["mark"]["versions"] == 1
    assert counts["mark"]["jobs"] == 1  # the pending job ended erased
    assert counts["text"]["text_bytes"] == len(DATA)
    # Raw upload and the writer's inline copy; the pending job lost its copy when it ended.
    assert counts["jobs"] == {"raw_bytes": len(raw), "inline_bytes": len(raw)}
    assert counts["finish"] == {k: v for step in STEPS[:-1] for k, v in counts[step].items()}
    finished = await store.jobs.get(SCOPE, erasure_id)
    assert finished is not None and finished.state == "completed" and finished.stats is not None
    body = msgspec.json.decode(finished.stats)
    assert body["versions"] == [{"sourceId": str(uuid.UUID(bytes=source)), "sourceVersionTx": tx}]
    assert (body["nodes"], body["spanRows"], body["reason"]) == (4, 4, "right to erasure")
    steps = [
        e.detail.split()[0] for e in finished.events if e.transition == "erase_step" and e.detail
    ]
    assert steps == list(STEPS[:-1])
    assert await store.erasure.leftovers() == {name: 0 for name, _, _ in LEFTOVER_CHECKS}

    # What is gone, and what remains.
    [erased] = await store.reads.versions(SCOPE, source)
    assert erased.erased_at == NOW + 1
    assert erased.erasure_id == erasure_id and erased.erase_reason == "right to erasure"
    with pytest.raises(ContentErased):
        await store.reads.text(SCOPE, source, tx, None, None)
    with pytest.raises(ContentErased):
        await store.reads.span_rows(SCOPE, source, tx)
    assert [await store.reads.node(SCOPE, n, None) for n in made.node_ids] == [None] * 4
    assert await store.reads.nodes(SCOPE, label=None, source_id=source, limit=10, after=None) == []
    assert not await store.raw.has(SCOPE, content_hash(raw))
    assert await store.reads.has_source(SCOPE, source)
    scrubbed = await store.jobs.get(SCOPE, writer.job_id)
    assert scrubbed is not None and scrubbed.state == "completed"
    assert msgspec.json.decode(scrubbed.payload)["content_b64"] == ""
    ended = await store.jobs.get(SCOPE, pending.job_id)
    assert ended is not None and ended.state == "dead" and b"bmV4dA" not in ended.payload
    assert ended.failure_reason is not None and ended.failure_reason.startswith("erased:")
    assert there.source_version_tx is not None
    assert await store.reads.text(OTHER, source, there.source_version_tx, None, None) == b"x\n"

    # The blocklist refuses the digests on every write path.
    with pytest.raises(ContentErased):
        await store.versions.commit(
            SCOPE, version(new_id(), raw), one_node("y\n"), dedup=Dedup.NONE
        )
    with pytest.raises(ContentErased):  # other raw bytes, the erased canonical text
        await store.versions.commit(
            SCOPE, version(new_id(), b"other"), rich_projection(new_id(), new_id()),
            dedup=Dedup.NONE,
        )  # fmt: skip
    refused = await store.jobs.enqueue(SCOPE, ingest_job(new_id(), raw), now_us=NOW, dedup=False)
    assert (refused.erased, refused.job_id, refused.deduplicated) == (True, None, False)
    with pytest.raises(ContentErased):
        await store.raw.put(SCOPE, content_hash(raw), upload, len(raw))

    # A held job committing the erased text: CommitOutcome.erased, the job dead.
    submit = ingest_job(new_id(), b"fresh bytes")
    await store.jobs.enqueue(SCOPE, submit, now_us=NOW, dedup=True)
    job = await lease(store)
    outcome = await store.versions.commit(
        SCOPE, version(submit.source_id, b"fresh bytes", job=job.job_id),
        rich_projection(new_id(), new_id()), dedup=Dedup.SUBMIT,
        completion=JobCompletion(held(job), NOW),
    )  # fmt: skip
    assert outcome.erased and outcome.source_version_tx is None and outcome.node_ids == []
    dead = await store.jobs.get(SCOPE, job.job_id)
    assert dead is not None and dead.state == "dead" and dead.failure_reason is not None
    assert dead.failure_reason.startswith("erased:")

    # A stream whose content hash is blocklisted: erased at its first part, the job dead.
    # (enqueue refuses those bytes: the job is enqueued without a hash, and the version the
    # worker streams carries the blocklisted one)
    streamed = NewJob(new_id(), "ingest:csv", "csv", new_id(), None, b"{}")
    await store.jobs.enqueue(SCOPE, streamed, now_us=NOW, dedup=False)
    sjob = await lease(store, "csv")
    sv = version(streamed.source_id, raw, fmt="csv", job=sjob.job_id)
    part = StreamPart(held(sjob), "w", 0, True, 0, NOW, LEASE_US)
    out = await store.versions.apply_stream_part(SCOPE, sv, stream_part(["a"], 0), part)
    assert out.erased and out.node_ids == []
    sdead = await store.jobs.get(SCOPE, sjob.job_id)
    assert sdead is not None and sdead.state == "dead"
    assert await store.erasure.leftovers() == {name: 0 for name, _, _ in LEFTOVER_CHECKS}
    # The blocklist is the scope's own: another scope still takes the same bytes.
    there_job = await store.jobs.enqueue(OTHER, ingest_job(new_id(), raw), now_us=NOW, dedup=False)
    assert not there_job.erased and there_job.job_id is not None


async def test_erasure_trims_a_node_another_source_keeps(store: StorageEngine) -> None:
    """A node (explicit id) written by two sources: erasing the later one leaves it current
    with the earlier source's content and spans."""
    shared = new_id()
    keep_src, gone_src = new_id(), new_id()

    def person(name: str) -> Projection:
        data = f"{name}\n".encode()
        props = msgspec.json.encode({"name": name})
        return Projection(
            data, [SpanOut(0, len(data) - 1, "name")], [NodeOut(("PERSON",), props, (0,), shared)]
        )

    keep = await store.versions.commit(
        SCOPE, version(keep_src, b"keep"), person("Ann"), dedup=Dedup.CONTENT
    )
    gone = await store.versions.commit(
        SCOPE, version(gone_src, b"gone"), person("Ann Example"), dedup=Dedup.CONTENT
    )
    node = await store.reads.node(SCOPE, shared, None)
    assert node is not None and node.properties == {"name": "Ann Example"}
    _, counts = await _erase(store, gone_src, now=NOW)
    assert (counts["nodes"].get("hidden", 0), counts["nodes"]["trimmed"]) == (0, 1)
    node = await store.reads.node(SCOPE, shared, None)
    assert node is not None and node.properties == {"name": "Ann"}
    assert [(p.source_id, p.source_version_tx, p.start, p.end) for p in node.provenance] == [
        (keep_src, keep.source_version_tx, 0, 3)
    ]
    assert gone.source_version_tx is not None and node.tx_from > gone.source_version_tx
    assert await store.erasure.leftovers() == {name: 0 for name, _, _ in LEFTOVER_CHECKS}


# -- the engine's lifecycle -------------------------------------------------------------------


async def test_engine_as_an_actor_and_its_wakeups(
    request: pytest.FixtureRequest, tmp_path: Path, store: StorageEngine
) -> None:
    """``run`` reports the opened engine; ``job_wakeups`` is ``None`` (one process sees every
    enqueue itself) or yields the format of a job enqueued by another connection."""
    assert store.location and "password" not in store.location
    assert isinstance(store.channel_statistics(), dict)
    assert store.writers_waiting() == 0
    engine = request.node.callspec.params["store"]
    if engine == "postgres":
        storage = StorageConfig(engine="postgres", dsn=create_database(), pool_size=2)
    else:
        storage = StorageConfig(path=str(tmp_path / "actor.db"), readers=1)
    actor = open_store(Config(storage=storage), tmp_path)
    async with anyio.create_task_group() as tg:
        started = await tg.start(actor.run)
        assert started is actor
        wakeups = actor.job_wakeups()
        if wakeups is None:
            assert engine == "sqlite"
        else:
            async with open_store(Config(storage=storage), tmp_path) as other:
                await other.jobs.enqueue(
                    SCOPE, ingest_job(new_id(), b"w", "csv"), now_us=NOW, dedup=True
                )
            with anyio.fail_after(10):
                woken = await anext(aiter(wakeups))
            assert woken in ("csv", ALL_FORMATS)
        assert await actor.keys.scope_for(b"\0" * 32) is None  # open and answering
        tg.cancel_scope.cancel()
