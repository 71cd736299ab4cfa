"""PostgreSQL's fast paths against the general path written once in telha.storage.core: each
case runs on two fresh databases — through the fast path (``telha_enqueue``, ``telha_lease``,
``telha_commit_single`` behind the store's methods) on one, through the core operation
(``store._transaction(…, core_op, …)``) on the other — and every row of every table must
be the same afterwards, as must the outcome. Only transaction times (taken from the clock
at run time) are normalised, by rank, and the migrations' applied-at times dropped; generated
ids are made deterministic per row build.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

import telha.domain.rows
from telha.domain.ids import blob_id_for, content_hash
from telha.domain.model import (
    CommitOutcome,
    Dedup,
    JobCompletion,
    LeaseRef,
    NewJob,
    NewVersion,
    Scope,
)
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.domain.rows import build_rows
from telha.storage.core import jobs as core_jobs
from telha.storage.core import versions as core_versions
from telha.storage.postgres import PostgresStore
from telha.storage.postgres import fast as pg_fast
from tests.support.pg import create_database, require_engine

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
NOW = 1_000_000_000_000
LEASE_US = 60_000_000
SOURCE = b"s" * 16
OTHER_SOURCE = b"S" * 16
HASH = b"h" * 32
NODE = b"n" * 16


def _job(
    n: int, *, fmt: str = "text", source: bytes = SOURCE, digest: bytes | None = HASH
) -> NewJob:
    return NewJob(bytes([n]) * 16, f"ingest:{fmt}", fmt, source, digest, b'{"name":"a.txt"}')


def _proj(text: bytes, node_id: bytes | None = None, props: bytes = b"{}") -> Projection:
    return Projection(
        text,
        [SpanOut(0, len(text), "body"), SpanOut(0, 1, "head")],
        [NodeOut(("DOC",), props, (0,)), NodeOut(("PART", "X"), b'{"k":1}', (0, 1), node_id)],
        [EdgeOut("HAS", 0, 1)],
    )


@dataclass
class Env:
    """One store on its own fresh database, and its DSN."""

    store: PostgresStore
    dsn: str


@pytest.fixture
async def envs(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Env, Env]]:
    require_engine("postgres")
    # Fresh uuid7s (node and edge ids of a version) become the same sequence in every row
    # build, so the two databases get the same ids.
    counter = itertools.count()

    def det_id() -> bytes:
        return next(counter).to_bytes(16, "big")

    def det_build(*args: Any, **kwargs: Any) -> telha.domain.rows.VersionRows:
        nonlocal counter
        counter = itertools.count(1)
        return build_rows(*args, **kwargs)

    monkeypatch.setattr(telha.domain.rows, "new_id", det_id)
    monkeypatch.setattr(core_versions, "build_rows", det_build)
    monkeypatch.setattr(pg_fast, "build_rows", det_build)
    pair = []
    for _ in range(2):
        dsn = create_database()
        store = PostgresStore(dsn, pool_size=2)
        await store.open()
        pair.append(Env(store, dsn))
    try:
        yield pair[0], pair[1]
    finally:
        for env in pair:
            await env.store.close()


async def _dump(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, transaction times replaced by their rank (``tx#1``…)."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = [
            r[0]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
                " AND table_type = 'BASE TABLE' ORDER BY table_name"
            )
        ]
        raw = {t: [tuple(r) for r in await conn.fetch(f'SELECT * FROM "{t}"')] for t in tables}
        # When each migration was applied: the one wall-clock column outside the cases.
        raw["schema_migrations"] = [r[:2] for r in raw["schema_migrations"]]
        txs = sorted({int(r[0]) for r in await conn.fetch("SELECT tx FROM source_versions")})
        clock = await conn.fetchval("SELECT tx FROM tx_clock")
    finally:
        await conn.close()
    names = {tx: f"tx#{i}" for i, tx in enumerate(txs, start=1)}
    if clock is not None and clock not in names:
        names[clock] = "tx#last"

    def norm(value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value in names:
            return names[value]
        if isinstance(value, str):
            for tx, name in names.items():
                value = value.replace(f"version={tx}", f"version={name}")
        return value

    return {
        t: sorted((tuple(norm(v) for v in row) for row in rows), key=repr)
        for t, rows in raw.items()
    }


def _norm_outcome(outcome: Any, txs: dict[int, str]) -> Any:
    """A commit's outcome with its transaction time as its rank; others as they are."""
    if isinstance(outcome, CommitOutcome):
        tx = outcome.source_version_tx
        return (outcome, txs.get(tx) if tx is not None else None)
    return outcome


async def _tx_names(dsn: str) -> dict[int, str]:
    conn = await asyncpg.connect(dsn)
    try:
        txs = sorted(int(r[0]) for r in await conn.fetch("SELECT tx FROM source_versions"))
    finally:
        await conn.close()
    return {tx: f"tx#{i}" for i, tx in enumerate(txs, start=1)}


Setup = Callable[[PostgresStore], Awaitable[None]]
Run = Callable[[PostgresStore], Awaitable[Any]]


async def _same(envs: tuple[Env, Env], setup: Setup, fast: Run, core: Run) -> tuple[Any, Any]:
    """Run ``setup`` on both, ``fast`` on the first and ``core`` on the second; the rows of
    every table and the outcomes must match. Returns both outcomes (normalised)."""
    a, b = envs
    await setup(a.store)
    await setup(b.store)
    got_fast = await fast(a.store)
    got_core = await core(b.store)
    dump_a, dump_b = await _dump(a.dsn), await _dump(b.dsn)
    assert dump_a.keys() == dump_b.keys()
    for table in dump_a:
        assert dump_a[table] == dump_b[table], table
    out_a = _norm_outcome(got_fast, await _tx_names(a.dsn))
    out_b = _norm_outcome(got_core, await _tx_names(b.dsn))
    assert _comparable(out_a) == _comparable(out_b)
    return out_a, out_b


def _comparable(outcome: Any) -> Any:
    """An outcome without its run-time values."""
    if isinstance(outcome, tuple) and outcome and isinstance(outcome[0], CommitOutcome):
        c = outcome[0]
        return (c.deduplicated, outcome[1], c.node_ids, c.edge_ids, c.erased, c.refused_children)
    return outcome


async def _nothing(store: PostgresStore) -> None:
    return None


# -- enqueue ------------------------------------------------------------------------------


def _enqueue(job: NewJob, dedup: bool, scope: Scope = SCOPE) -> tuple[Run, Run]:
    async def fast(store: PostgresStore) -> Any:
        return await store.enqueue_job(scope, job, now_us=NOW + 5, dedup=dedup)

    async def core(store: PostgresStore) -> Any:
        return await store._transaction(
            "enqueue job", core_jobs.enqueue_job, scope, job, NOW + 5, dedup
        )

    return fast, core


async def _with_version(store: PostgresStore) -> None:
    """A committed (upload) version of SOURCE with content hash HASH."""
    version = NewVersion(SOURCE, "a.txt", "text", HASH, 5, "upload")
    await store.commit_version(SCOPE, version, _proj(b"hello"), dedup=Dedup.CONTENT)


async def _with_active_job(store: PostgresStore) -> None:
    await store.enqueue_job(SCOPE, _job(1), now_us=NOW, dedup=False)
    await store.enqueue_job(SCOPE, _job(2, fmt="web", digest=None), now_us=NOW, dedup=False)


async def _with_blocklist(store: PostgresStore) -> None:
    await store.enqueue_job(
        SCOPE, _job(9, source=OTHER_SOURCE, digest=None), now_us=NOW, dedup=False
    )
    conn = await asyncpg.connect(store.dsn)
    try:
        await conn.execute(
            "INSERT INTO erasure_blocklist (scope_id, digest, kind, erasure_id, created_at)"
            " SELECT scope_id, $1, 'content', $2, $3 FROM scopes",
            HASH, b"e" * 16, NOW,
        )  # fmt: skip
        text = b"blocked text"
        await conn.execute(
            "INSERT INTO erasure_blocklist (scope_id, digest, kind, erasure_id, created_at)"
            " SELECT scope_id, $1, 'canonical', $2, $3 FROM scopes",
            content_hash(text), b"e" * 16, NOW,
        )  # fmt: skip
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("case", "setup", "job", "dedup"),
    [
        ("new job in a new scope", _nothing, _job(5), True),
        ("new job without dedup", _with_version, _job(5), False),
        ("dedup against the latest version", _with_version, _job(5), True),
        ("dedup against an active job", _with_active_job, _job(5), True),
        ("fetch-format dedup", _with_active_job, _job(6, fmt="web", digest=None), True),
        (
            "fetch-format job, another format",
            _with_active_job,
            _job(6, fmt="pdf", digest=None),
            True,
        ),
        ("blocklisted hash", _with_blocklist, _job(5), True),
        ("blocklisted hash without dedup", _with_blocklist, _job(5), False),
    ],
)
async def test_enqueue(
    envs: tuple[Env, Env], case: str, setup: Setup, job: NewJob, dedup: bool
) -> None:
    fast, core = _enqueue(job, dedup)
    out, _ = await _same(envs, setup, fast, core)
    if "dedup against" in case or case == "fetch-format dedup":
        assert out.deduplicated
    if case.startswith("blocklisted"):
        assert out.erased


# -- lease --------------------------------------------------------------------------------


async def _with_jobs(store: PostgresStore) -> None:
    other = Scope("t", "other")
    await store.enqueue_job(other, _job(1, fmt="csv"), now_us=NOW, dedup=False)
    await store.enqueue_job(
        SCOPE, _job(2, fmt="csv", source=OTHER_SOURCE), now_us=NOW + 1, dedup=False
    )
    await store.enqueue_job(SCOPE, _job(3, fmt="text"), now_us=NOW + 2, dedup=False)
    await store.enqueue_job(SCOPE, _job(4, fmt="text"), now_us=NOW + 10**12, dedup=False)


@pytest.mark.parametrize(
    ("formats", "scope", "expected"),
    [
        (["csv", "text"], None, 1),
        (["csv", "text"], SCOPE, 2),
        (["text"], SCOPE, 3),
        (["pdf"], None, None),
        (["csv"], Scope("no", "such"), None),
    ],
)
async def test_lease(
    envs: tuple[Env, Env], formats: list[str], scope: Scope | None, expected: int | None
) -> None:
    async def fast(store: PostgresStore) -> Any:
        return await store.lease_next_job(
            formats, scope=scope, worker_id="w1", now_us=NOW + 100, lease_us=LEASE_US
        )

    async def core(store: PostgresStore) -> Any:
        return await store._transaction(
            "lease job", core_jobs.lease, formats, scope, "w1", NOW + 100, LEASE_US
        )

    out, _ = await _same(envs, _with_jobs, fast, core)
    assert (out.job_id if out is not None else None) == (
        bytes([expected]) * 16 if expected is not None else None
    )


# -- single-shot commit -------------------------------------------------------------------


async def _leased(store: PostgresStore) -> None:
    await store.enqueue_job(SCOPE, _job(7), now_us=NOW, dedup=False)
    held = await store.lease_next_job(
        ["text"], scope=SCOPE, worker_id="w1", now_us=NOW, lease_us=LEASE_US
    )
    assert held is not None and held.job_id == _job(7).job_id


async def _version_then_leased(store: PostgresStore) -> None:
    """SOURCE's latest version has HASH and the canonical text b"hello" (another job)."""
    await _with_version(store)
    await _leased(store)


async def _node_then_leased(store: PostgresStore) -> None:
    """NODE exists (written by an upload of OTHER_SOURCE)."""
    version = NewVersion(OTHER_SOURCE, "b.txt", "text", b"o" * 32, 3, "upload")
    await store.commit_version(SCOPE, version, _proj(b"old", NODE, b'{"v":0}'), dedup=Dedup.CONTENT)
    await _leased(store)


async def _blocklisted_then_leased(store: PostgresStore) -> None:
    await _leased(store)
    await _with_blocklist(store)


def _commit(text: bytes, node_id: bytes | None = None) -> tuple[Run, Run, list[bool]]:
    version = NewVersion(SOURCE, "a.txt", "text", HASH, len(text), "w1", _job(7).job_id)
    proj = _proj(text, node_id)
    completion = JobCompletion(LeaseRef(_job(7).job_id, 1), NOW + 50, b'{"n":1}', (), "w1")
    answered: list[bool] = []

    async def fast(store: PostgresStore) -> Any:
        orig = store._commit_fast

        async def spy(*args: Any) -> CommitOutcome | None:
            got = await orig(*args)
            answered.append(got is not None)
            return got

        store._commit_fast = spy  # type: ignore[method-assign]
        return await store.commit_version(
            SCOPE, version, proj, dedup=Dedup.SUBMIT, completion=completion
        )

    async def core(store: PostgresStore) -> Any:
        canonical = content_hash(text)
        return await store._transaction(
            "commit version", core_versions.commit, SCOPE, version, proj, canonical,
            blob_id_for(canonical).bytes, Dedup.SUBMIT, completion,
        )  # fmt: skip

    return fast, core, answered


@pytest.mark.parametrize(
    ("case", "setup", "text", "node_id", "fast_answers"),
    [
        ("new", _leased, b"fresh text", None, True),
        ("new with an explicit id not yet written", _leased, b"fresh text", NODE, True),
        ("duplicate of another job's version", _version_then_leased, b"hello", None, False),
        ("same bytes, other text", _version_then_leased, b"hello!", None, True),
        ("explicit node id that exists", _node_then_leased, b"fresh text", NODE, False),
        ("blocklisted canonical text", _blocklisted_then_leased, b"blocked text", None, False),
    ],
)
async def test_commit_single(
    envs: tuple[Env, Env],
    case: str,
    setup: Setup,
    text: bytes,
    node_id: bytes | None,
    fast_answers: bool,
) -> None:
    fast, core, answered = _commit(text, node_id)
    out, _ = await _same(envs, setup, fast, core)
    assert answered == [fast_answers]
    commit = out[0]
    assert commit.deduplicated == case.startswith("duplicate")
    assert commit.erased == case.startswith("blocklisted")
