"""The SQLite writer's queue (docs/architecture.md, "The storage seam"; bench/RESULTS.md,
"Third round"): write transactions queue on the writer's thread and run one after the other,
each its own ``BEGIN IMMEDIATE`` … ``COMMIT``, each caller woken as its own commits — never
held for a transaction queued after it — and a scope interned by a transaction that rolled
back is never seen by the one queued behind it, nor a lease head it wrote. On a real SQLite
file."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from telha.domain.ids import new_id
from telha.domain.model import NewJob, Scope
from telha.storage.core.tx import Tx
from telha.storage.jobs import fair_lease
from telha.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.anyio

SCOPE = Scope("writer-t", "org")


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "w.db") as opened:
        yield opened


async def test_each_caller_is_woken_as_its_own_transaction_commits(
    sqlite_store: SqliteStore,
) -> None:
    """The first transaction's caller returns while the second (queued behind it) is still
    running on the writer's thread, held there until the first caller has returned: a
    caller that waited for the transactions queued after it would never return."""
    first_back = threading.Event()
    order: list[str] = []

    async def quick(tx: Tx) -> int:
        return await tx.execute("CREATE TABLE t (x INTEGER)")

    async def held(tx: Tx) -> int:
        # On the writer's thread: wait (off the event loop) for the first caller.
        assert first_back.wait(10), "the first caller was not woken before this one ran"
        return await tx.execute("INSERT INTO t VALUES (1)")

    async def after(tx: Tx) -> int:
        return await tx.execute("INSERT INTO t VALUES (2)")

    async def call(name: str, op: Any) -> None:
        await sqlite_store.transaction(name, op)
        order.append(name)
        if name == "first":
            first_back.set()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "first", quick)
            tg.start_soon(call, "second", held)
            tg.start_soon(call, "third", after)
            await anyio.wait_all_tasks_blocked()
            assert sqlite_store.writers_waiting() in (1, 2)  # queued behind the running one
    assert order == ["first", "second", "third"]  # call order, each its own outcome
    assert sqlite_store.writers_waiting() == 0


async def test_a_scope_interned_by_a_rolled_back_transaction_is_not_seen_next(
    sqlite_store: SqliteStore,
) -> None:
    """A transaction interns a new scope and fails (rolled back: the scope row is gone);
    the one queued right behind it interns the scope afresh, under an id its own
    transaction holds, and that id is the one remembered."""
    started = threading.Event()
    go_on = threading.Event()

    async def interns_then_fails(tx: Tx) -> None:
        await tx.scope_id(SCOPE)
        started.set()
        assert go_on.wait(10)
        raise ValueError("rolled back on purpose")

    async def interns(tx: Tx) -> tuple[int, Any]:
        sid = await tx.scope_id(SCOPE)
        row = await tx.fetchone("SELECT tenant_id FROM scopes WHERE scope_id = ?", sid)
        return sid, row

    got: list[tuple[int, Any]] = []

    async def second() -> None:
        got.append(await sqlite_store.transaction("second", interns))

    async def first() -> None:
        with pytest.raises(ValueError, match="on purpose"):
            await sqlite_store.transaction("first", interns_then_fails)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.to_thread.run_sync(started.wait, 10)
            tg.start_soon(second)  # queued while the first is still open
            await anyio.wait_all_tasks_blocked()
            go_on.set()
    ((sid, row),) = got
    assert row == ("writer-t",), "the second transaction used the rolled-back scope id"
    again = await sqlite_store.transaction("third", interns)
    assert again == (sid, ("writer-t",))


async def test_a_lease_head_seen_by_a_rolled_back_transaction_is_written_next(
    sqlite_store: SqliteStore,
) -> None:
    """The writer remembers the lease heads committed transactions saw (heads are never
    removed), so an enqueue skips the head's read; a head written by a transaction that
    rolled back is not remembered: the next enqueue of that scope and format writes it, and
    its job is leased."""

    async def heads_then_fails(tx: Tx) -> None:
        await fair_lease.note_head(tx, await tx.scope_id(SCOPE), "text")
        raise ValueError("rolled back on purpose")

    with pytest.raises(ValueError, match="on purpose"):
        await sqlite_store.transaction("first", heads_then_fails)
    job = NewJob(new_id(), "ingest:text", "text", new_id(), None, b"{}")
    await sqlite_store.jobs.enqueue(SCOPE, job, now_us=1_000, dedup=False)
    leased = await sqlite_store.jobs.lease_next(
        ["text"], scope=None, worker_id="w", now_us=2_000, lease_us=60_000_000
    )
    assert leased is not None and leased.job_id == job.job_id

    async def head_known(tx: Tx) -> bool:
        return tx.head_known(await tx.scope_id(SCOPE), "text")

    assert await sqlite_store.transaction("known", head_known)
