"""The lease/retry state machine over a real store (SQLite, and PostgreSQL on the test
cluster), property-tested (hypothesis stateful): enqueue, lease, heartbeat, fail, release,
complete, reap and the passage of time, checked step by step against a model of the lease
rules (docs/architecture.md, "A job's life")."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from telha.config import JobsConfig
from telha.domain.errors import StaleLease
from telha.domain.ids import new_id
from telha.domain.model import Dedup, JobCompletion, LeaseRef, NewJob, NewVersion, Scope
from telha.domain.policy import PERMANENT_KINDS
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.queue.job_queue import JobQueue
from telha.storage import StorageEngine
from telha.storage.postgres import PostgresStore
from telha.storage.sqlite import SqliteStore
from tests.support.pg import create_database

SCOPE = Scope("t", "o")
LEASE_US = 1_000_000
MAX_ATTEMPTS = 2
KINDS = ["transient", "resource_limit", "corrupt_input", "unsupported_feature"]


@dataclass
class Model:
    state: str = "pending"
    attempts: int = 0
    generation: int = 0
    deadline: int = 0
    available_at: int = 0


class QueueMachine(RuleBasedStateMachine):
    """One store, one queue, a clock the rules move; the model says what must be true."""

    portal: BlockingPortal
    tmp: Path
    #: A fresh, empty store (not yet opened) per example.
    make_store: Callable[[Path], StorageEngine]

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000_000_000
        self.jobs: dict[bytes, Model] = {}
        self.stack = ExitStack()

    @initialize()
    def open_store(self) -> None:
        self.store = type(self).make_store(self.tmp)
        self.portal.call(self.store.__aenter__)
        cfg = JobsConfig(
            max_attempts=MAX_ATTEMPTS,
            lease_secs=LEASE_US / 1e6,
            backoff_base_ms=100,
            backoff_max_s=1.0,
        )
        self.queue = JobQueue(self.store, cfg, clock=lambda: self.now, rng=random.Random(0))

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.portal.call(self.store.__aexit__, None, None, None)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def run() -> Any:
            return await fn(*args, **kwargs)

        return self.portal.call(run)

    def _held(self) -> list[bytes]:
        """Jobs held now; when none is, lease one (letting backoff time pass if needed), so
        every rule acts on a job and long retry histories are reached."""
        held = [j for j, m in self.jobs.items() if m.state == "leased"]
        if not held and any(m.state == "pending" for m in self.jobs.values()):
            self.now = max(
                [self.now] + [m.available_at for m in self.jobs.values() if m.state == "pending"]
            )
            self.lease()
            held = [j for j, m in self.jobs.items() if m.state == "leased"]
        return held

    def _pick(self, data: st.DataObject) -> tuple[bytes, Model] | None:
        """A held job (leasing one if needed) and its model, or ``None`` when there is none."""
        held = self._held()
        if not held:
            return None
        job_id = data.draw(st.sampled_from(held))
        return job_id, self.jobs[job_id]

    @precondition(lambda self: len(self.jobs) < 3)  # few jobs, many transitions each
    @rule()
    def enqueue(self) -> None:
        job_id = new_id()
        job = NewJob(job_id, "ingest:text", "text", new_id(), new_id() * 2, b"{}")
        outcome = self._call(self.queue.enqueue, SCOPE, job, dedup=True)
        assert not outcome.deduplicated
        self.jobs[job_id] = Model(available_at=self.now)

    @rule()
    def lease(self) -> None:
        leased = self._call(
            self.store.jobs.lease_next,
            ["text"],
            scope=None,
            worker_id="w",
            now_us=self.now,
            lease_us=LEASE_US,
        )
        available = [
            j for j, m in self.jobs.items() if m.state == "pending" and m.available_at <= self.now
        ]
        if leased is None:
            assert available == []
            return
        m = self.jobs[leased.job_id]
        assert leased.job_id in available and leased.attempts == m.attempts
        assert leased.lease_generation == m.generation + 1
        m.state, m.generation, m.deadline = "leased", leased.lease_generation, self.now + LEASE_US

    @rule(data=st.data(), stale=st.booleans())
    def heartbeat(self, data: st.DataObject, stale: bool) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        job_id, m = picked
        gen = m.generation - 1 if stale else m.generation
        extended, deadline = self._call(self.queue.heartbeat, [LeaseRef(job_id, gen)])
        if stale:
            assert extended == []
        else:
            assert extended == [job_id]
            m.deadline = deadline

    @rule(data=st.data(), kind=st.sampled_from(KINDS))
    def fail(self, data: st.DataObject, kind: str) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        job_id, m = picked
        job = self._call(self.queue.fail, LeaseRef(job_id, m.generation), kind, "boom")
        m.attempts += 1
        if kind in PERMANENT_KINDS or m.attempts >= MAX_ATTEMPTS:
            assert job.state == "dead"
            m.state = "dead"
        else:
            assert job.state == "pending" and job.available_at >= self.now
            m.state, m.available_at = "pending", job.available_at

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        job_id, m = picked
        assert self._call(self.queue.release, LeaseRef(job_id, m.generation), "test")
        m.state, m.available_at = "pending", self.now

    @rule(data=st.data(), stale=st.booleans())
    def complete(self, data: st.DataObject, stale: bool) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        job_id, m = picked
        lease = LeaseRef(job_id, m.generation - 1 if stale else m.generation)
        version = NewVersion(new_id(), "x", "text", new_id() * 2, 1, "w", job_id)
        proj = Projection(b"x", [SpanOut(0, 1, "body")], [NodeOut(("A",), b"{}", (0,))])
        completion = JobCompletion(lease, self.now)

        def commit() -> None:
            self._call(
                self.store.versions.commit, SCOPE, version, proj,
                dedup=Dedup.SUBMIT, completion=completion,
            )  # fmt: skip

        if stale:
            with pytest.raises(StaleLease):
                commit()
            return
        commit()
        m.state = "completed"

    @rule(dt=st.sampled_from([0, 1, LEASE_US // 2, LEASE_US + 1, 3 * LEASE_US]))
    def time_passes(self, dt: int) -> None:
        self.now += dt

    @rule()
    def reap(self) -> None:
        self._call(self.queue.reap)
        for job_id, m in self.jobs.items():
            if m.state == "leased" and m.deadline < self.now:
                m.attempts += 1
                m.state = "dead" if m.attempts >= MAX_ATTEMPTS else "pending"
                if m.state == "pending":  # back off: not before now, not past the cap
                    job = self._call(self.store.jobs.get, SCOPE, job_id)
                    assert self.now <= job.available_at <= self.now + 1_000_000
                    m.available_at = job.available_at

    @invariant()
    def store_matches_model(self) -> None:
        if not hasattr(self, "store"):
            return
        for job_id, m in self.jobs.items():
            job = self._call(self.store.jobs.get, SCOPE, job_id)
            assert (job.state, job.attempts, job.lease_generation) == (
                m.state,
                m.attempts,
                m.generation,
            )
            assert job.events[0].transition == "enqueued"
            if m.state in ("completed", "dead"):
                assert job.events[-1].transition in ("completed", "dead")


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal(backend="asyncio") as p:
        yield p


_TABLES = (
    "jobs", "job_events", "source_versions", "blob_chunks", "nodes", "node_labels", "edges",
    "span_rows", "raw_blobs", "raw_chunks", "ambiguities", "api_keys", "scopes",
)  # fmt: skip


@pytest.fixture(scope="module")
def make_store(portal: BlockingPortal, engine: str) -> Callable[[Path], StorageEngine]:
    """A fresh empty store per call: a new SQLite file, or the module's PostgreSQL database
    with every table emptied."""
    if engine == "sqlite":
        return lambda tmp: SqliteStore(tmp / f"{new_id().hex()}.db", readers=1)
    dsn = create_database()

    async def empty() -> None:
        async with PostgresStore(dsn, pool_size=1):  # migrates the first time
            pass
        conn = await asyncpg.connect(dsn)
        try:
            # DELETE, not TRUNCATE: a few rows each, and no file rewrites per example.
            await conn.execute("; ".join(f"DELETE FROM {t}" for t in _TABLES))
        finally:
            await conn.close()

    def make(_tmp: Path) -> StorageEngine:
        portal.call(empty)
        return PostgresStore(dsn, pool_size=2)

    return make


def test_lease_retry_state_machine(
    portal: BlockingPortal, tmp_path: Path, make_store: Callable[[Path], StorageEngine]
) -> None:
    QueueMachine.portal = portal
    QueueMachine.tmp = tmp_path
    QueueMachine.make_store = staticmethod(make_store)  # type: ignore[method-assign]
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        QueueMachine,
        settings=settings(
            max_examples=60,
            derandomize=True,  # the same examples every CI run
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_expired_leases_count_until_dead(
    portal: BlockingPortal, tmp_path: Path, make_store: Callable[[Path], StorageEngine]
) -> None:
    """Each expired lease is a failed attempt with backoff; at max_attempts the job is dead."""
    now = [1_000_000_000]
    store = make_store(tmp_path)
    portal.call(store.__aenter__)
    try:
        cfg = JobsConfig(
            max_attempts=MAX_ATTEMPTS, lease_secs=1.0, backoff_base_ms=100, backoff_max_s=1.0
        )
        queue = JobQueue(store, cfg, clock=lambda: now[0], rng=random.Random(0))
        job = NewJob(new_id(), "ingest:text", "text", new_id(), new_id() * 2, b"{}")

        async def scenario() -> list[str]:
            await queue.enqueue(SCOPE, job, dedup=True)
            states = []
            for _ in range(MAX_ATTEMPTS):
                leased = await store.jobs.lease_next(
                    ["text"], scope=None, worker_id="w", now_us=now[0], lease_us=LEASE_US
                )
                assert leased is not None and leased.job_id == job.job_id
                now[0] += LEASE_US + 1
                assert await queue.reap() == 1
                record = await store.jobs.get(SCOPE, job.job_id)
                assert record is not None
                states.append(record.state)
                now[0] = max(now[0], record.available_at)
            return states

        assert portal.call(scenario) == ["pending"] * (MAX_ATTEMPTS - 1) + ["dead"]
    finally:
        portal.call(store.__aexit__, None, None, None)
