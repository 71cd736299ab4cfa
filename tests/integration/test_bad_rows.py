"""No stored row can crash an actor (docs/architecture.md, "Supervision and bad rows";
docs/operations.md, "Bad rows"): each supervised actor that processes stored rows is fed a
row written with raw SQL as an older version or a damaged disk might have left it, then a
good row; it runs under a real :class:`~telha.service.supervisor.Supervisor` that tolerates no crash
at all (``max_restarts=0``: the first crash ends the test with ``CrashLoop``), against a real
store of each engine. The poisoned row is recorded failed with its reason, the good row is
handled, and the actor is still at work afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import prometheus_client
import pytest

from telha.check.runner import run_checks
from telha.config import JobsConfig
from telha.domain.erasure import ERASE_FORMAT, ERASE_KIND, ErasePayload
from telha.domain.errors import StorageError
from telha.domain.ids import content_hash, new_id, now_us
from telha.domain.model import JobRecord, LeaseRef, NewJob, Scope
from telha.domain.row_faults import RowFault
from telha.erasure.eraser import Eraser
from telha.metrics import Metrics
from telha.queue.job_queue import JobQueue
from telha.retention.collector import Retention
from telha.search.indexer import SearchIndexer
from telha.service.supervisor import Supervisor
from telha.storage import StorageEngine
from telha.storage.core.row_faults import per_row
from telha.storage.core.tx import Tx
from tests.integration.test_search_queue import _commit, _hits, _index_rows
from tests.support.metrics import parse, value
from tests.support.pg import ENGINES
from tests.support.stores import fresh_store
from tests.support.wait import until

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")


@pytest.fixture(params=ENGINES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageEngine]:
    """A fresh store of each engine that keeps the full-text index."""
    async with fresh_store(str(request.param), tmp_path, search=True) as opened:
        yield opened


@asynccontextmanager
async def supervised(*actors: tuple[str, Callable[..., Awaitable[Any]]]) -> AsyncIterator[None]:
    """Run ``actors`` (``(name, run)``) under one Supervisor that allows no crash: a crash
    raises ``CrashLoop`` out of the block."""
    async with anyio.create_task_group() as tg:
        sup = Supervisor(tg, max_restarts=0, backoff_base_s=0.01)
        for name, run in actors:
            await sup.start(name, run)
        yield
        tg.cancel_scope.cancel()


async def _sql(store: StorageEngine, sql: str, *params: Any) -> int:
    """One raw statement in its own transaction (the poison)."""

    async def op(tx: Tx) -> int:
        return await tx.execute(sql, *params)

    return await store.transaction("poison", op)  # type: ignore[attr-defined,no-any-return]


def _failed(metrics: Metrics, actor: str, what: str) -> float:
    text = prometheus_client.generate_latest(metrics.registry).decode()
    return value(parse(text), "telha_rows_failed_total", actor=actor, what=what)


async def test_a_failing_store_is_never_taken_for_a_bad_row(store: StorageEngine) -> None:
    """Inside a row's processing, an error of the driver itself (here a statement the
    database refuses) still leaves as the store's failure, for the supervisor; a value that
    does not decode becomes that row's fault."""

    async def refused(tx: Tx) -> None:
        with per_row(tx, "job", b"k"):
            await tx.execute("UPDATE no_such_table SET x = 1")

    async def undecodable(tx: Tx) -> None:
        with per_row(tx, "job", b"k"):
            msgspec.json.decode(b"{")

    with pytest.raises(StorageError):
        await store.transaction("refused", refused)  # type: ignore[attr-defined]
    with pytest.raises(RowFault) as caught:
        await store.transaction("undecodable", undecodable)  # type: ignore[attr-defined]
    assert caught.value.reason.startswith("DecodeError: ")


async def _job(store: StorageEngine, job_id: bytes) -> JobRecord:
    job = await store.jobs.get(None, job_id)
    assert job is not None
    return job


async def _enqueue(store: StorageEngine, n: int) -> list[bytes]:
    """``n`` text jobs of their own sources, in enqueue order."""
    ids = []
    for i in range(n):
        raw = f"content {i}".encode()
        job = NewJob(new_id(), "ingest:text", "text", new_id(), content_hash(raw), b"{}")
        await store.jobs.enqueue(SCOPE, job, now_us=now_us(), dedup=False)
        ids.append(job.job_id)
    return ids


async def _lease_all(store: StorageEngine, n: int, ahead_us: int = 0) -> list[LeaseRef]:
    """Lease ``n`` text jobs as of ``ahead_us`` from now (past a reaped job's backoff)."""
    leases = []
    for _ in range(n):
        held = await store.jobs.lease_next(
            ["text"], scope=None, worker_id="w", now_us=now_us() + ahead_us, lease_us=60_000_000
        )
        assert held is not None
        leases.append(LeaseRef(held.job_id, held.lease_generation))
    return leases


async def test_reaper_dead_letters_an_expired_job_that_does_not_decode(
    store: StorageEngine,
) -> None:
    """An expired lease whose streaming checkpoint does not decode ends ``dead``
    (``corrupt_row``, with a ``dead`` event); the other expired lease is reaped; the queue
    goes on reaping."""
    metrics = Metrics()
    queue = JobQueue(store, JobsConfig(reap_interval_s=0.05), metrics=metrics)
    bad, good = await _enqueue(store, 2)
    await _lease_all(store, 2)
    await _sql(store, "UPDATE jobs SET continuation = ? WHERE job_id = ?", b"\xc1junk", bad)
    await _sql(store, "UPDATE jobs SET lease_deadline = 1 WHERE state = 'leased'")

    async def reaped() -> bool:
        return (await _job(store, good)).state == "pending"

    async with supervised(("job_queue", queue.run)):
        await until(reaped)
        dead = await _job(store, bad)
        assert dead.state == "dead"
        assert dead.failure_reason is not None
        assert dead.failure_reason.startswith("corrupt_row: DecodeError: ")
        assert dead.events[-1].transition == "dead"
        assert dead.events[-1].detail == dead.failure_reason
        assert _failed(metrics, "job_queue", "job") == 1
        # Still reaping: the good job leased and expired again is reaped again.
        await _lease_all(store, 1, ahead_us=3_600_000_000)
        await _sql(store, "UPDATE jobs SET lease_deadline = 1 WHERE state = 'leased'")
        await until(reaped)
        events = [e.transition for e in (await _job(store, good)).events]
        assert events.count("lease_expired") == 2
    report = await run_checks(store)
    assert [v.line() for v in report.violations if v.check == "job_states"] == []


async def test_reaper_dead_letters_an_expired_job_whose_text_is_not_utf8(
    store: StorageEngine, request: pytest.FixtureRequest
) -> None:
    """SQLite stores any bytes as ``TEXT``; a lease owner that is not UTF-8 fails the read
    of that row only (a driver data error, not the store failing): the job ends ``dead``."""
    if "postgres" in request.node.callspec.id:
        pytest.skip("PostgreSQL refuses text that is not UTF-8 when it is written")
    metrics = Metrics()
    queue = JobQueue(store, JobsConfig(reap_interval_s=0.05), metrics=metrics)
    bad, good = await _enqueue(store, 2)
    await _lease_all(store, 2)
    await _sql(
        store, "UPDATE jobs SET lease_owner = CAST(? AS TEXT) WHERE job_id = ?", b"\xff", bad
    )
    await _sql(store, "UPDATE jobs SET lease_deadline = 1 WHERE state = 'leased'")

    async def reaped() -> bool:
        return (await _job(store, good)).state == "pending"

    async with supervised(("job_queue", queue.run)):
        await until(reaped)
        dead = await _job(store, bad)
        assert dead.state == "dead" and dead.lease_owner is None
        assert dead.failure_reason is not None
        assert dead.failure_reason.startswith("corrupt_row: OperationalError: Could not decode")


async def test_reaper_reaps_a_job_whose_source_id_is_not_an_id(store: StorageEngine) -> None:
    """A job row whose source id is not 16 bytes is reaped like any other: the log line
    naming it gives the id in hex instead of failing the queue."""
    queue = JobQueue(store, JobsConfig(reap_interval_s=0.05), metrics=Metrics())
    (job,) = await _enqueue(store, 1)
    await _lease_all(store, 1)
    await _sql(store, "UPDATE jobs SET source_id = ?, lease_deadline = 1 WHERE job_id = ?",
               b"abc", job)  # fmt: skip

    async def reaped() -> bool:
        return (await _job(store, job)).state == "pending"

    async with supervised(("job_queue", queue.run)):
        await until(reaped)


async def test_loss_write_back_dead_letters_a_lost_job_that_does_not_decode(
    store: StorageEngine,
) -> None:
    """Jobs handed back as lost with their worker, one whose checkpoint does not decode: it
    ends ``dead`` (``corrupt_row``), the other goes back to pending at once."""
    metrics = Metrics()
    queue = JobQueue(store, JobsConfig(), metrics=metrics)
    bad, good = await _enqueue(store, 2)
    leases = await _lease_all(store, 2)
    await _sql(store, "UPDATE jobs SET continuation = ? WHERE job_id = ?", b"\xc1junk", bad)

    async def lost() -> bool:
        return (await _job(store, good)).state == "pending"

    async with supervised(("job_queue", queue.run)):
        queue.lost(leases, "worker w: stream ended")
        await until(lost, within_s=10)
        dead = await _job(store, bad)
        assert dead.state == "dead"
        assert dead.failure_reason is not None
        assert dead.failure_reason.startswith("corrupt_row: DecodeError: ")
        assert _failed(metrics, "job_queue", "job") == 1


async def _erase_job(store: StorageEngine, source: bytes) -> bytes:
    payload = ErasePayload(source_id=str(uuid.UUID(bytes=source)), reason="test", principal="p")
    job = NewJob(new_id(), ERASE_KIND, ERASE_FORMAT, source, None, msgspec.json.encode(payload))
    await store.erasure.enqueue(SCOPE, job, payload, now_us=now_us())
    return job.job_id


async def test_eraser_dead_letters_an_erase_job_whose_payload_does_not_decode(
    store: StorageEngine,
) -> None:
    """An erase job whose stored payload is not an erasure ends ``dead`` (``corrupt_row:
    step mark: …``); the next erase job runs to completion."""
    bad_source, good_source = b"b" * 16, b"g" * 16
    await _commit(store, ["alpha"], source=bad_source)
    await _commit(store, ["beta"], source=good_source)
    bad = await _erase_job(store, bad_source)
    await _sql(store, "UPDATE jobs SET payload = ? WHERE job_id = ?", b'{"source_id": 7}', bad)
    good = await _erase_job(store, good_source)
    metrics = Metrics()
    queue = JobQueue(store, JobsConfig(), metrics=metrics)
    eraser = Eraser(store, queue)

    async def erased() -> bool:
        return (await _job(store, good)).state == "completed"

    async with supervised(("job_queue", queue.run), ("eraser", eraser.run)):
        await until(erased)
        dead = await _job(store, bad)
        assert dead.state == "dead"
        assert dead.failure_reason is not None
        assert dead.failure_reason.startswith("corrupt_row: step mark: ValidationError: ")
        assert dead.events[-1].transition == "dead"
        assert _failed(metrics, "eraser", "job") == 1
        # Still erasing: a third erasure completes.
        third_source = b"t" * 16
        await _commit(store, ["gamma"], source=third_source)
        third = await _erase_job(store, third_source)
        queue.notify(ERASE_FORMAT)

        async def third_done() -> bool:
            return (await _job(store, third)).state == "completed"

        await until(third_done)
    versions = await store.reads.versions(SCOPE, bad_source)
    assert all(v.erasure_id is None for v in versions)  # the dead erasure wrote nothing


async def _entry(store: StorageEngine, source: bytes) -> tuple[bool, str | None]:
    """``(done, failure)`` of a source's search entry."""

    async def op(tx: Tx) -> tuple[bool, str | None]:
        row = await tx.fetchone(
            "SELECT done, failure FROM search_sources WHERE source_id = ?", source
        )
        assert row is not None
        return bool(row[0]), row[1]

    return await store.read(op)  # type: ignore[attr-defined,no-any-return]


async def test_search_indexer_marks_an_entry_it_cannot_index_failed(store: StorageEngine) -> None:
    """A version whose node labels do not decode, and one whose canonical text is gone, are
    marked failed with their reason (``telha check`` lists them) and hold no index row; the
    good version between them is indexed; so is one published afterwards."""
    labels, text, good = b"l" * 16, b"x" * 16, b"g" * 16
    await _commit(store, ["alpha", "beta"], source=labels)
    await _commit(store, ["gamma"], source=text)
    good_tx = await _commit(store, ["delta"], source=good)
    await _sql(store, "UPDATE nodes SET labels = 'not json' WHERE source_id = ?", labels)
    await _sql(
        store,
        "DELETE FROM blob_chunks WHERE blob_id IN (SELECT blob_id FROM source_versions"
        " WHERE source_id = ?)",
        text,
    )
    metrics = Metrics()
    indexer = SearchIndexer(store, idle_s=0.02, settle_s=0, metrics=metrics)

    async def indexed(tx: int) -> bool:
        return any(at == tx for at, _ in await _index_rows(store))

    async with supervised(("search_indexer", indexer.run)):
        await until(lambda: indexed(good_tx))
        await until(lambda: _entry_failed(store, text))
        done, reason = await _entry(store, labels)
        assert done and reason is not None and reason.startswith("DecodeError: ")
        done, reason = await _entry(store, text)
        assert done and reason is not None and "the text is missing or short" in reason
        assert _failed(metrics, "search_indexer", "search_entry") == 2
        later = await _commit(store, ["epsilon"], source=b"e" * 16)
        await until(lambda: indexed(later))
        await until(lambda: _queue_empty(store))
    assert {at for at, _ in await _index_rows(store)} == {good_tx, later}
    report = await run_checks(store)
    problems = [v.line() for v in report.violations if v.check == "search_index"]
    assert len(problems) == 2, problems
    assert all("could not be indexed" in p for p in problems), problems


async def test_a_search_records_an_entry_it_cannot_index_and_answers(
    store: StorageEngine,
) -> None:
    """A search does its scope's waiting index work first (no indexer runs here): an entry
    it cannot index is marked failed, the search answers from the others."""
    bad, good = b"b" * 16, b"g" * 16
    await _commit(store, ["alpha"], source=bad)
    await _commit(store, ["alpha", "beta"], source=good)
    await _sql(store, 'UPDATE span_rows SET "end" = 99999999 WHERE source_id = ?', bad)
    hits = await _hits(store, "alpha")
    assert {h.source_id for h in hits} == {good}
    done, reason = await _entry(store, bad)
    assert done and reason is not None and "past the canonical text stored" in reason


async def _entry_failed(store: StorageEngine, source: bytes) -> bool:
    return (await _entry(store, source))[1] is not None


async def _queue_empty(store: StorageEngine) -> bool:
    return await store.search.queued_versions() == 0


async def test_retention_passes_by_an_ended_job_it_cannot_read(
    store: StorageEngine, request: pytest.FixtureRequest
) -> None:
    """An ended job whose source id is stored as text, and a raw blob whose size is, are
    left as they are, logged (the job counted); the other ended job and unnamed raw blob
    are removed; the next pass runs."""
    if "postgres" in request.node.callspec.id:
        pytest.skip(
            "PostgreSQL's column types refuse every value the retention pass could fail to"
            " read (bytea, bigint): no row can poison it there"
        )
    bad, good = await _enqueue(store, 2)
    await _sql(store, "UPDATE jobs SET state = 'dead', failure_reason = 'x', updated_at = 1")
    await _sql(store, "UPDATE jobs SET source_id = 'not bytes' WHERE job_id = ?", bad)
    blob = "INSERT INTO raw_blobs (scope_id, content_hash, size, complete, created_at) SELECT"
    blob += " scope_id, ?, ?, 1, 1 FROM jobs LIMIT 1"
    await _sql(store, blob, b"B" * 32, "big")
    await _sql(store, blob, b"G" * 32, 3)
    await _sql(store, "INSERT INTO raw_chunks SELECT scope_id, ?, 0, ? FROM jobs LIMIT 1",
               b"G" * 32, b"abc")  # fmt: skip
    metrics = Metrics()
    retention = Retention(
        store, JobsConfig(retain_days=1, gc_interval_s=0.05), metrics, first_pass_s=0
    )

    async def gone() -> bool:
        return await store.jobs.get(None, good) is None

    async with supervised(("retention", retention.run)):
        await until(gone)

        async def counted() -> bool:  # settled once the pass's transactions are done
            return _failed(metrics, "retention", "retention_job") == 1

        await until(counted)
        # The next pass runs too: a job that ends now-old is removed.
        (third,) = await _enqueue(store, 1)
        await _sql(store, "UPDATE jobs SET state = 'dead', failure_reason = 'x', updated_at = 1"
                   " WHERE job_id = ?", third)  # fmt: skip

        async def third_gone() -> bool:
            return await store.jobs.get(None, third) is None

        await until(third_gone)
    assert _failed(metrics, "retention", "retention_job") == 1  # passed by, not met again
    assert await store.jobs.get(None, bad) is not None

    async def blobs(tx: Tx) -> list[bytes]:
        return [bytes(r[0]) for r in await tx.fetchall("SELECT content_hash FROM raw_blobs")]

    assert await store.read(blobs) == [b"B" * 32]  # type: ignore[attr-defined]
