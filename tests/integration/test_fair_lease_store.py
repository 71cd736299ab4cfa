"""Fair leasing and per-scope usage on the store directly, on both engines
(:mod:`telha.storage.jobs.fair_lease`, :mod:`telha.storage.quotas.limits`): scopes take turns
(least recently leased first, then oldest first within a scope), a late scope's single job
goes ahead of a busy scope's backlog, a retried job keeps its scope's turn, a scoped lease
sees only its scope; stored bytes follow every write and removal of raw and canonical bytes
(upload, commit, stream append, erasure, retention) exactly, with no scan; per-scope limits
are set, replaced and removed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from telha.domain.errors import QuotaExceeded
from telha.domain.ids import content_hash, new_id
from telha.domain.model import BLOB_CHUNK, Dedup, LeaseRef, NewJob, Scope, WebhookTarget
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx
from telha.storage.retention.passes import BlobCandidate, remove_blob
from tests.integration.test_erasure_store import _erase
from tests.integration.test_storage_contract import failing, one_node, version

pytestmark = pytest.mark.anyio

A, B, C = Scope("fair-a", "org"), Scope("fair-b", "org"), Scope("fair-c", "org")
NOW = 1_800_000_000_000_000
LEASE_US = 60_000_000


def _job(fmt: str = "text") -> NewJob:
    return NewJob(new_id(), f"ingest:{fmt}", fmt, new_id(), None, b"{}")


async def _enqueue(
    store: StorageEngine, scope: Scope, n: int, at: int, fmt: str = "text"
) -> list[bytes]:
    ids = []
    for i in range(n):
        job = _job(fmt)
        out = await store.jobs.enqueue(scope, job, now_us=at + i, dedup=False)
        assert out.job_id == job.job_id
        ids.append(job.job_id)
    return ids


async def _lease_all(
    store: StorageEngine,
    n: int,
    at: int,
    formats: tuple[str, ...] = ("text",),
    scope: Scope | None = None,
) -> list[tuple[str, bytes]]:
    """``n`` leases at ``at``, ``at + 1``, …: ``(tenant, job_id)`` each."""
    got = []
    for i in range(n):
        job = await store.jobs.lease_next(
            list(formats), scope=scope, worker_id="w", now_us=at + i, lease_us=LEASE_US
        )
        assert job is not None, f"lease {i} found nothing"
        got.append((job.scope.tenant_id, job.job_id))
    return got


async def test_a_late_scope_goes_before_a_busy_scopes_backlog(store: StorageEngine) -> None:
    a_ids = await _enqueue(store, A, 40, NOW)
    first = await _lease_all(store, 3, NOW + 100)
    assert [j for _, j in first] == a_ids[:3]  # alone, A is served oldest first
    b_ids = await _enqueue(store, B, 1, NOW + 200)
    # B was never leased: its job is next, though 37 of A's are older.
    assert await _lease_all(store, 2, NOW + 300) == [("fair-b", b_ids[0]), ("fair-a", a_ids[3])]
    assert (
        await store.jobs.lease_next(
            ["text"], scope=B, worker_id="w", now_us=NOW + 400, lease_us=LEASE_US
        )
        is None
    )


async def test_scopes_take_turns_and_each_is_oldest_first(store: StorageEngine) -> None:
    ids = {s.tenant_id: await _enqueue(store, s, 5, NOW + k * 10) for k, s in enumerate((A, B, C))}
    got = await _lease_all(store, 15, NOW + 1000)
    tenants = [t for t, _ in got]
    # Three full rounds and then some: no scope gets a second job before the others had one.
    for r in range(5):
        assert sorted(tenants[3 * r : 3 * r + 3]) == ["fair-a", "fair-b", "fair-c"]
    for tenant, mine in ids.items():
        assert [j for t, j in got if t == tenant] == mine
    assert (
        await store.jobs.lease_next(
            ["text"], scope=None, worker_id="w", now_us=NOW + 2000, lease_us=LEASE_US
        )
        is None
    )


async def test_formats_a_poller_does_not_take_are_left_alone(store: StorageEngine) -> None:
    await _enqueue(store, A, 2, NOW, fmt="csv")
    b_text = await _enqueue(store, B, 1, NOW + 10)
    assert await _lease_all(store, 1, NOW + 100) == [("fair-b", b_text[0])]
    got = await _lease_all(store, 2, NOW + 200, formats=("csv", "text"))
    assert [t for t, _ in got] == ["fair-a", "fair-a"]


async def test_a_scoped_lease_and_a_retried_job(store: StorageEngine) -> None:
    a_ids = await _enqueue(store, A, 3, NOW)
    b_ids = await _enqueue(store, B, 2, NOW + 10)
    # A scoped poller sees its scope only, still oldest first.
    assert await _lease_all(store, 1, NOW + 100, scope=B) == [("fair-b", b_ids[0])]
    # A's first job fails and comes back after its backoff: its scope's head is still there,
    # and within the scope it now comes after the jobs available before it.
    ((_, held_id),) = await _lease_all(store, 1, NOW + 200)
    assert held_id == a_ids[0]
    job = await store.jobs.get(A, held_id)
    assert job is not None
    failed = await store.jobs.fail(
        LeaseRef(held_id, job.lease_generation), "transient", "busy", now_us=NOW + 300,
        decide=failing(NOW + 300),
    )  # fmt: skip
    assert failed.state == "pending"
    later = failed.available_at + 1
    got = await _lease_all(store, 4, later)
    assert [j for t, j in got if t == "fair-a"] == [a_ids[1], a_ids[2], a_ids[0]]
    assert got[0][0] == "fair-b"  # B was leased longest ago
    assert [j for t, j in got if t == "fair-b"] == [b_ids[1]]


# -- usage -------------------------------------------------------------------------------------


async def _scanned(tx: Tx, sid_of: Scope) -> int:
    """The scope's bytes, counted the slow way (a scan of both chunk tables)."""
    sid = await tx.known_scope_id(sid_of)
    length = tx.dialect.byte_length
    row = await tx.fetchone(
        f"SELECT (SELECT coalesce(sum({length}(data)), 0) FROM blob_chunks WHERE scope_id = ?)"
        f" + (SELECT coalesce(sum({length}(data)), 0) FROM raw_chunks WHERE scope_id = ?)",
        sid, sid,
    )  # fmt: skip
    assert row is not None
    return int(row[0])


async def _agrees(store: Any, scope: Scope) -> int:
    counted = await store.quotas.stored_bytes(scope)
    assert counted == await store.read(_scanned, scope)
    return int(counted)


async def test_stored_bytes_follow_every_write_and_removal(
    store: StorageEngine, tmp_path: Path
) -> None:
    s: Any = store
    assert await store.quotas.stored_bytes(A) == 0  # a scope never seen
    # Raw upload: 2 chunks and a bit.
    data = bytes(range(256)) * ((2 * BLOB_CHUNK + 100) // 256 + 1)
    data = data[: 2 * BLOB_CHUNK + 100]
    digest = content_hash(data)
    path = tmp_path / "up"
    path.write_bytes(data)
    await store.raw.put(A, digest, path, len(data))
    assert await _agrees(s, A) == len(data)
    await store.raw.put(A, digest, path, len(data))  # the same bytes again: no change
    assert await _agrees(s, A) == len(data)
    # A version's canonical text; the same text in another source shares its chunks.
    src, text = new_id(), "hello fairness " * 100
    await store.versions.commit(A, version(src, b"r1"), one_node(text), dedup=Dedup.NONE)
    assert await _agrees(s, A) == len(data) + len(text)
    await store.versions.commit(A, version(new_id(), b"r2"), one_node(text), dedup=Dedup.NONE)
    assert await _agrees(s, A) == len(data) + len(text)
    # Another scope's bytes are its own.
    await store.versions.commit(B, version(new_id(), b"r3"), one_node("b" * 10), dedup=Dedup.NONE)
    assert await _agrees(s, B) == 10
    assert await store.quotas.total_stored_bytes() == len(data) + len(text) + 10
    # Erasure removes the source's text (its chunks stay while another source shares them).
    erased = new_id()
    await store.versions.commit(
        A, version(erased, b"r4"), one_node("secret " * 50), dedup=Dedup.NONE
    )
    assert await _agrees(s, A) == len(data) + len(text) + 350
    await _erase(s, A, erased)
    assert await _agrees(s, A) <= len(data) + len(text)
    # Retention removes the raw blob.
    sid = await s.read(lambda tx: tx.known_scope_id(A))
    blob = BlobCandidate(sid, digest, len(data))
    assert await s.transaction("gc", remove_blob, blob, 2**62, 100) is True
    assert await _agrees(s, A) <= len(text)
    assert await store.quotas.pending_jobs(A) == 0


async def test_pending_jobs_are_counted_up_to_a_cap(store: StorageEngine) -> None:
    await _enqueue(store, A, 5, NOW)
    await _lease_all(store, 1, NOW + 100, scope=A)
    assert await store.quotas.pending_jobs(A) == 4
    assert await store.quotas.pending_jobs(A, cap=2) == 2
    assert await store.quotas.pending_jobs(B) == 0


async def test_an_enqueue_held_to_max_pending_is_refused_and_writes_nothing(
    store: StorageEngine,
) -> None:
    await _enqueue(store, A, 2, NOW)
    hooked = replace(_job(), webhook=WebhookTarget("http://127.0.0.1:9/hook", 1))
    for job in (_job(), hooked):  # PostgreSQL's one-call enqueue and its general path alike
        with pytest.raises(QuotaExceeded, match="max_pending_jobs: this scope has 2"):
            await store.jobs.enqueue(A, job, now_us=NOW + 10, dedup=False, max_pending=2)
        assert await store.jobs.get(A, job.job_id) is None
    assert await store.quotas.pending_jobs(A) == 2
    # Under the limit, or another scope, or no limit: enqueued.
    out = await store.jobs.enqueue(A, _job(), now_us=NOW + 20, dedup=False, max_pending=3)
    assert out.job_id is not None
    assert (await store.jobs.enqueue(B, _job(), now_us=NOW + 21, dedup=False, max_pending=1)).job_id
    assert (await store.jobs.enqueue(A, _job(), now_us=NOW + 22, dedup=False)).job_id
    assert await store.quotas.pending_jobs(A) == 4


async def test_scope_limits_set_replace_remove(store: StorageEngine) -> None:
    assert await store.quotas.limits(A) == {}
    await store.quotas.set_limit(A, "max_pending_jobs", 10)
    await store.quotas.set_limit(A, "requests_per_second", 2.5)
    await store.quotas.set_limit(A, "max_pending_jobs", 20)
    assert await store.quotas.limits(A) == {"max_pending_jobs": 20.0, "requests_per_second": 2.5}
    assert await store.quotas.limits(B) == {}
    await store.quotas.set_limit(A, "max_pending_jobs", None)
    assert await store.quotas.limits(A) == {"requests_per_second": 2.5}
