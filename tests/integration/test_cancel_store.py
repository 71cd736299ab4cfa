"""Cancelling jobs on the store itself, on both engines (one operation written once in
telha.storage.jobs.cancel): a pending job, a leased one (its generation bumped, its holder
refused everywhere, nothing written, no attempt counted), a half-streamed version abandoned
with the previous version staying current, cancelling twice, finished jobs, other scopes,
children and grandchildren, and the same bytes enqueued again afterwards."""

from __future__ import annotations

import pytest

from telha.config import JobsConfig
from telha.domain.erasure import ERASE_KIND
from telha.domain.errors import Conflict, JobFinished, NotFound, StaleLease
from telha.domain.ids import new_id
from telha.domain.model import (
    Dedup,
    JobCompletion,
    LeaseRef,
    NewJob,
    StreamPart,
)
from telha.queue.job_queue import JobQueue
from telha.storage import StorageEngine
from tests.integration.test_storage_contract import (
    LEASE_US,
    NOW,
    OTHER,
    SCOPE,
    failing,
    held,
    ingest_job,
    lease,
    losing,
    one_node,
    stream_part,
    transitions,
    version,
)

pytestmark = pytest.mark.anyio


async def test_cancel_a_pending_job_then_again_then_the_same_bytes(store: StorageEngine) -> None:
    source, raw = new_id(), b"sent by mistake"
    job = ingest_job(source, raw)
    await store.jobs.enqueue(SCOPE, job, now_us=NOW, dedup=True)
    out = await store.jobs.cancel(SCOPE, job.job_id, now_us=NOW + 1)
    assert out.job.state == "cancelled" and out.job.attempts == 0
    assert out.job.lease_generation == 0 and out.job.lease_owner is None
    assert [e.transition for e in out.job.events] == ["enqueued", "cancelled"]
    assert out.job.events[-1].at == NOW + 1
    assert out.cancelled == ((job.job_id, "ingest:text"),) and out.revoked == ()
    # Terminal: never leased, not counted as active.
    assert (
        await store.jobs.lease_next(
            ["text"], scope=SCOPE, worker_id="w", now_us=NOW + 10, lease_us=LEASE_US
        )
        is None
    )
    assert await store.jobs.active_counts() == {}
    # Twice: the same job, nothing written.
    again = await store.jobs.cancel(SCOPE, job.job_id, now_us=NOW + 2)
    assert again.job == out.job and again.cancelled == () and again.revoked == ()
    # The same bytes again: a new job, not deduplicated against the cancelled one.
    retry = ingest_job(source, raw)
    enq = await store.jobs.enqueue(SCOPE, retry, now_us=NOW + 3, dedup=True)
    assert (enq.deduplicated, enq.job_id) == (False, retry.job_id)


async def test_cancel_a_leased_job_revokes_its_lease(store: StorageEngine) -> None:
    source, raw = new_id(), b"being worked on"
    await store.jobs.enqueue(SCOPE, ingest_job(source, raw), now_us=NOW, dedup=True)
    job = await lease(store, worker="w1")
    assert job.lease_generation == 1
    out = await store.jobs.cancel(SCOPE, job.job_id, now_us=NOW + 5)
    assert out.job.state == "cancelled" and out.job.lease_generation == 2
    assert out.job.lease_owner is None and out.job.lease_deadline is None
    assert out.job.attempts == 0  # the attempt in progress is not counted
    assert out.revoked == ((LeaseRef(job.job_id, 1), "ingest:text"),)
    detail = out.job.events[-1].detail or ""
    assert "worker w1" in detail and "generation 1" in detail
    assert await store.jobs.lease_states([job.job_id, new_id()]) == {job.job_id: ("cancelled", 2)}
    # The holder is fenced off: heartbeat, failure, submission, release — nothing written.
    assert await store.jobs.heartbeat([held(job)], now_us=NOW + 6, lease_us=LEASE_US) == []
    with pytest.raises(StaleLease):
        await store.jobs.fail(held(job), "transient", "x", now_us=NOW + 6, decide=failing(NOW))
    with pytest.raises(StaleLease):
        await store.versions.commit(
            SCOPE, version(source, raw, job=job.job_id), one_node("late\n"), dedup=Dedup.SUBMIT,
            completion=JobCompletion(held(job), NOW + 7),
        )  # fmt: skip
    assert not await store.jobs.release(held(job), now_us=NOW + 8, detail="shutdown")
    assert await store.versions.latest(SCOPE, source) is None
    assert await transitions(store, job.job_id) == ["enqueued", "leased", "cancelled"]
    # Nor does the reaper touch it once its old deadline passes.
    assert await store.jobs.reap_expired(now_us=NOW + 10 * LEASE_US, decide=losing(NOW)) == []
    final = await store.jobs.get(SCOPE, job.job_id, events=False)
    assert final is not None and final.state == "cancelled"


async def test_cancel_mid_stream_leaves_the_previous_version_current(
    store: StorageEngine,
) -> None:
    source = new_id()
    first_raw, second_raw = b"version one", b"version two"
    await store.jobs.enqueue(SCOPE, ingest_job(source, first_raw, "csv"), now_us=NOW, dedup=True)
    first = await lease(store, "csv")
    v1 = version(source, first_raw, fmt="csv", job=first.job_id)
    done = await store.versions.commit(
        SCOPE, v1, one_node("one\n", "ROW"), dedup=Dedup.SUBMIT,
        completion=JobCompletion(held(first), NOW + 1),
    )  # fmt: skip
    assert done.source_version_tx is not None
    await store.jobs.enqueue(
        SCOPE, ingest_job(source, second_raw, "csv"), now_us=NOW + 2, dedup=True
    )
    job = await lease(store, "csv", now=NOW + 3)
    v2 = version(source, second_raw, fmt="csv", job=job.job_id)
    p0 = stream_part(["r"] * 50, 0)
    await store.versions.apply_stream_part(
        SCOPE, v2, p0, StreamPart(held(job), "w", 0, True, 0, NOW, 1)
    )
    out = await store.jobs.cancel(SCOPE, job.job_id, now_us=NOW + 4)
    assert [e.transition for e in out.job.events][-2:] == ["stream_abandoned", "cancelled"]
    # The next part and the finalize are refused; the first version stays current and only
    # its row is visible (the 50 streamed rows at no time).
    with pytest.raises(StaleLease):
        p1 = stream_part(["r"], len(p0.canonical))
        await store.versions.apply_stream_part(
            SCOPE, v2, p1, StreamPart(held(job), "w", 1, False, len(p0.canonical), NOW, 1)
        )
    latest = await store.versions.latest(SCOPE, source)
    assert latest is not None and latest.tx == done.source_version_tx
    rows = await store.reads.nodes(SCOPE, label="ROW", source_id=source, limit=100, after=None)
    assert len(rows) == 1
    versions = await store.reads.versions(SCOPE, source)
    assert [v.tx for v in versions] == [done.source_version_tx]


async def test_cancel_refuses_finished_jobs_other_scopes_and_erasures(
    store: StorageEngine,
) -> None:
    source, raw = new_id(), b"done already"
    await store.jobs.enqueue(SCOPE, ingest_job(source, raw), now_us=NOW, dedup=True)
    job = await lease(store)
    await store.versions.commit(
        SCOPE, version(source, raw, job=job.job_id), one_node("x\n"), dedup=Dedup.SUBMIT,
        completion=JobCompletion(held(job), NOW + 1),
    )  # fmt: skip
    with pytest.raises(JobFinished):
        await store.jobs.cancel(SCOPE, job.job_id, now_us=NOW + 2)
    dead_job = ingest_job(new_id(), b"doomed")
    await store.jobs.enqueue(SCOPE, dead_job, now_us=NOW, dedup=True)
    leased = await lease(store)
    await store.jobs.fail(
        held(leased), "corrupt_input", "corrupt_input: bad", now_us=NOW, decide=failing(NOW)
    )
    for children in (False, True):
        with pytest.raises(JobFinished):
            await store.jobs.cancel(SCOPE, dead_job.job_id, now_us=NOW + 2, children=children)
    pending = ingest_job(new_id(), b"someone else's")
    await store.jobs.enqueue(SCOPE, pending, now_us=NOW, dedup=True)
    with pytest.raises(NotFound):
        await store.jobs.cancel(OTHER, pending.job_id, now_us=NOW + 2)
    with pytest.raises(NotFound):
        await store.jobs.cancel(SCOPE, new_id(), now_us=NOW + 2)
    still = await store.jobs.get(SCOPE, pending.job_id, events=False)
    assert still is not None and still.state == "pending"
    erase = NewJob(new_id(), ERASE_KIND, "erase", new_id(), None, b"{}")
    await store.jobs.enqueue(SCOPE, erase, now_us=NOW, dedup=False)
    with pytest.raises(Conflict):
        await store.jobs.cancel(SCOPE, erase.job_id, now_us=NOW + 2)


async def test_cancel_with_children_cancels_unfinished_descendants(store: StorageEngine) -> None:
    """A parent's children are enqueued when it completes: ``children`` on a completed
    parent cancels its unfinished children and theirs; completed ones stay."""
    source, raw = new_id(), b"an e-mail"
    await store.jobs.enqueue(SCOPE, ingest_job(source, raw, "eml"), now_us=NOW, dedup=True)
    parent = await lease(store, "eml")
    kids = tuple(ingest_job(new_id(), f"attachment {i}".encode(), "csv") for i in range(3))
    await store.versions.commit(
        SCOPE, version(source, raw, fmt="eml", job=parent.job_id), one_node("mail\n"),
        dedup=Dedup.SUBMIT, completion=JobCompletion(held(parent), NOW + 1, children=kids),
    )  # fmt: skip
    # One child completes with a grandchild of its own; one is leased; one stays pending.
    done_kid = await lease(store, "csv", now=NOW + 2)
    grandchild = ingest_job(new_id(), b"inner", "text")
    await store.versions.commit(
        SCOPE, version(done_kid.source_id, b"x", fmt="csv", job=done_kid.job_id),
        one_node("kid\n"), dedup=Dedup.SUBMIT,
        completion=JobCompletion(held(done_kid), NOW + 3, children=(grandchild,)),
    )  # fmt: skip
    busy_kid = await lease(store, "csv", now=NOW + 4)
    with pytest.raises(JobFinished):
        await store.jobs.cancel(SCOPE, parent.job_id, now_us=NOW + 5)
    out = await store.jobs.cancel(SCOPE, parent.job_id, now_us=NOW + 5, children=True)
    assert out.job.state == "completed"
    states = {
        k.job_id: (await store.jobs.get(SCOPE, k.job_id, events=False)).state  # type: ignore[union-attr]
        for k in (*kids, grandchild)
    }
    pending_kid = next(k.job_id for k in kids if k.job_id not in (done_kid.job_id, busy_kid.job_id))
    assert states == {
        done_kid.job_id: "completed",
        busy_kid.job_id: "cancelled",
        pending_kid: "cancelled",
        grandchild.job_id: "cancelled",
    }
    assert sorted(out.cancelled) == sorted(
        [(busy_kid.job_id, "ingest:csv"), (pending_kid, "ingest:csv"),
         (grandchild.job_id, "ingest:text")]
    )  # fmt: skip
    assert out.revoked == ((LeaseRef(busy_kid.job_id, 1), "ingest:csv"),)
    event = (await store.jobs.get(SCOPE, pending_kid)).events[-1]  # type: ignore[union-attr]
    assert event.transition == "cancelled" and "parent" in (event.detail or "")
    # Again: nothing left to cancel.
    again = await store.jobs.cancel(SCOPE, parent.job_id, now_us=NOW + 6, children=True)
    assert again.cancelled == () and again.job.state == "completed"
    # A pending leaf with children=true: itself only.
    leaf = ingest_job(new_id(), b"leaf")
    await store.jobs.enqueue(SCOPE, leaf, now_us=NOW, dedup=True)
    alone = await store.jobs.cancel(SCOPE, leaf.job_id, now_us=NOW + 7, children=True)
    assert alone.cancelled == ((leaf.job_id, "ingest:text"),)


async def test_a_replica_finds_the_leases_cancelled_through_another(store: StorageEngine) -> None:
    """The JobQueue of the process that leased a job learns of a cancel written elsewhere
    (another replica) from :meth:`JobQueue.check_revoked`: its poller is told, then its slot
    freed; a lease that is still held, or was lost another way, is not a cancel."""
    queue = JobQueue(store, JobsConfig(), clock=lambda: NOW)
    for raw in (b"one", b"two"):
        await store.jobs.enqueue(SCOPE, ingest_job(new_id(), raw), now_us=NOW, dedup=True)
    calls: list[tuple[str, bytes]] = []
    jobs = []
    for _ in range(2):
        job = await queue.lease(["text"], scope=SCOPE, worker_id="w")
        queue.track(
            job,
            lambda j=job.job_id: calls.append(("finished", j)),
            lambda j=job.job_id: calls.append(("cancelled", j)),
        )
        jobs.append(job)
    assert await queue.check_revoked() == 0 and calls == []
    await store.jobs.cancel(SCOPE, jobs[0].job_id, now_us=NOW + 1)  # as another replica does
    await store.jobs.fail(held(jobs[1]), "transient", "x", now_us=NOW + 1, decide=failing(NOW))
    assert await queue.check_revoked() == 1
    assert calls == [("cancelled", jobs[0].job_id), ("finished", jobs[0].job_id)]
    assert queue.leased_here(jobs[0].job_id) is None
    assert queue.leased_here(jobs[1].job_id) is not None  # failed elsewhere: not a cancel
    assert await queue.check_revoked() == 0


async def test_the_queue_cancel_tells_the_local_poller(store: StorageEngine) -> None:
    queue = JobQueue(store, JobsConfig(), clock=lambda: NOW)
    await store.jobs.enqueue(SCOPE, ingest_job(new_id(), b"local"), now_us=NOW, dedup=True)
    job = await queue.lease(["text"], scope=SCOPE, worker_id="w")
    calls: list[str] = []
    queue.track(job, lambda: calls.append("finished"), lambda: calls.append("cancelled"))
    out = await queue.cancel(SCOPE, job.job_id)
    assert out.state == "cancelled" and calls == ["cancelled", "finished"]
    assert await queue.cancel(SCOPE, job.job_id) == out and calls == ["cancelled", "finished"]


async def test_a_refused_holder_of_a_cancelled_job_still_gets_its_cancel(
    store: StorageEngine,
) -> None:
    """A heartbeat or submission refused before the replica's check saw the cancel
    (:meth:`JobQueue.forget`) leaves the cancel to the check: the poller is still told, then
    its slot freed; a lease lost another way is freed only once its holder was refused (the
    worker may still be busy with it until then)."""
    queue = JobQueue(store, JobsConfig(), clock=lambda: NOW)
    for raw in (b"cancelled", b"failed"):
        await store.jobs.enqueue(SCOPE, ingest_job(new_id(), raw), now_us=NOW, dedup=True)
    calls: list[tuple[str, int]] = []
    jobs = []
    for i in range(2):
        job = await queue.lease(["text"], scope=SCOPE, worker_id="w")
        queue.track(
            job,
            lambda i=i: calls.append(("finished", i)),
            lambda i=i: calls.append(("cancelled", i)),
        )
        jobs.append(job)
    await store.jobs.cancel(SCOPE, jobs[0].job_id, now_us=NOW + 1)  # as another replica does
    await store.jobs.fail(held(jobs[1]), "transient", "x", now_us=NOW + 1, decide=failing(NOW))
    queue.forget(LeaseRef(jobs[0].job_id, jobs[0].lease_generation - 1))  # not held so
    assert await queue.check_revoked() == 1  # the cancel is found all the same
    assert calls == [("cancelled", 0), ("finished", 0)]
    assert await queue.check_revoked() == 0
    assert calls == [("cancelled", 0), ("finished", 0)]  # job 1 failed elsewhere: kept
    queue.forget(held(jobs[1]))  # its worker was refused: now its slot is freed
    assert await queue.check_revoked() == 0
    assert calls == [("cancelled", 0), ("finished", 0), ("finished", 1)]
    queue.forget(held(jobs[0]))  # already gone
    assert await queue.check_revoked() == 0 and len(calls) == 3
    assert queue.leased_here(jobs[0].job_id) is None and queue.leased_here(jobs[1].job_id) is None
