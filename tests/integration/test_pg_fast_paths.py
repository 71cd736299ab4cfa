"""PostgreSQL's fast paths against the general path written once in telha.storage.core: each
case runs on two fresh databases — through the fast path (``telha_enqueue``, ``telha_lease_fair``,
``telha_commit_single`` behind the store's methods) on one, through the core operation
(``store.transaction(…, core_op, …)``) on the other — and every row of every table must
be the same afterwards, as must the outcome. Only transaction times (taken from the clock
at run time) are normalised, by rank, and the migrations' applied-at times dropped; generated
ids are made deterministic per row build.

The single-shot commit publishes what it writes (docs/architecture.md, "Versions and node
identity"): node match keys, edge sources, the version's ``published_tx``, root node and
changes, the job's stats and ``completed`` detail with the change counts. It handles a source
with nothing to supersede only; a re-ingest, a retired source or an open stream of the source
take the general path.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
import msgspec
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
    StreamPart,
)
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.domain.rows import build_rows
from telha.storage.core.row_tables import ROW_TABLES
from telha.storage.jobs import lifecycle as core_jobs
from telha.storage.postgres import PostgresStore
from telha.storage.postgres import fast as pg_fast
from telha.storage.versions import commit as core_versions
from telha.storage.versions import streams as core_streams
from telha.storage.versions.publish import retire
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
        [
            NodeOut(("DOCUMENT",), props, (0,)),
            NodeOut(("PART", "X"), b'{"k":1}', (0, 1), node_id),
        ],
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
    # Fresh uuid7s (node and edge ids of a version) become a sequence that restarts at
    # every row build from a base the projection's text gives, so the two databases get the
    # same ids (a fast path that falls back builds again: the same ids) and two versions of
    # different texts never share one; a stream's provisional blob id is a constant.
    counter = itertools.count()

    def det_id() -> bytes:
        return next(counter).to_bytes(16, "big")

    def det_build(*args: Any, **kwargs: Any) -> telha.domain.rows.VersionRows:
        nonlocal counter
        proj: Projection = args[4]
        base = int.from_bytes(content_hash(proj.canonical)[:4], "big") << 32
        counter = itertools.count(base + 1)
        return build_rows(*args, **kwargs)

    monkeypatch.setattr(telha.domain.rows, "new_id", det_id)
    monkeypatch.setattr(core_versions, "build_rows", det_build)
    monkeypatch.setattr(core_streams, "build_rows", det_build)
    monkeypatch.setattr(core_streams, "new_id", lambda: b"B" * 16)
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
        # Stored bytes per scope: the counter's shards are the writing backends' pids.
        usage: dict[int, int] = {}
        for sid, _, n in raw["scope_usage"]:
            usage[sid] = usage.get(sid, 0) + n
        raw["scope_usage"] = sorted(usage.items())
        # Version times, publish times (a stream's finalize) and retire times.
        txs = sorted(
            {
                int(t)
                for r in await conn.fetch(
                    "SELECT tx, published_tx, retired_tx FROM source_versions"
                )
                for t in r
                if t is not None
            }
        )
        clock = await conn.fetchval("SELECT tx FROM tx_clock")
    finally:
        await conn.close()
    names = {tx: f"tx#{i}" for i, tx in enumerate(txs, start=1)}
    if clock is not None and clock not in names:
        names[clock] = "tx#last"

    def norm(value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value in names:
            return names[value]
        if isinstance(value, str):  # event details: "version=T …", "version T left …"
            for tx, name in names.items():
                value = value.replace(str(tx), name)
        if isinstance(value, bytes):  # a stream's checkpoint: its tx as a msgpack uint64
            for tx, name in names.items():
                value = value.replace(b"\xcf" + tx.to_bytes(8, "big"), name.encode())
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
        return (
            c.deduplicated, outcome[1], c.node_ids, c.edge_ids, c.erased, c.refused_children,
            c.changes,
        )  # fmt: skip
    return outcome


async def _nothing(store: PostgresStore) -> None:
    return None


# -- enqueue ------------------------------------------------------------------------------


def _enqueue(job: NewJob, dedup: bool, scope: Scope = SCOPE) -> tuple[Run, Run]:
    async def fast(store: PostgresStore) -> Any:
        return await store.jobs.enqueue(scope, job, now_us=NOW + 5, dedup=dedup)

    async def core(store: PostgresStore) -> Any:
        return await store.transaction(
            "enqueue job", core_jobs.enqueue_job, scope, job, NOW + 5, dedup
        )

    return fast, core


async def _with_version(store: PostgresStore) -> None:
    """A committed (upload) version of SOURCE with content hash HASH."""
    version = NewVersion(SOURCE, "a.txt", "text", HASH, 5, "upload")
    await store.versions.commit(SCOPE, version, _proj(b"hello"), dedup=Dedup.CONTENT)


async def _with_retired_version(store: PostgresStore) -> None:
    """SOURCE's latest version (content hash HASH) was retired since."""
    await _with_version(store)
    sid = await store._scope_id(SCOPE)
    await store.transaction("retire source", retire, sid, SOURCE, "gone")


async def _with_erased_version(store: PostgresStore) -> None:
    """SOURCE's latest version (content hash HASH) was erased, its digest not blocklisted
    (as an empty file's: telha.domain.erasure.blockable)."""
    await _with_version(store)
    conn = await asyncpg.connect(store.dsn)
    try:
        await conn.execute("UPDATE source_versions SET erased_at = $1", NOW + 1)
    finally:
        await conn.close()


async def _with_active_job(store: PostgresStore) -> None:
    await store.jobs.enqueue(SCOPE, _job(1), now_us=NOW, dedup=False)
    await store.jobs.enqueue(SCOPE, _job(2, fmt="web", digest=None), now_us=NOW, dedup=False)


async def _with_blocklist(store: PostgresStore) -> None:
    await store.jobs.enqueue(
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
        ("no dedup against a retired version", _with_retired_version, _job(5), True),
        ("no dedup against an erased version", _with_erased_version, _job(5), True),
        ("no dedup against an open stream", lambda s: _streaming(s, keep=True), _job(5), True),
        ("dedup against an active job", _with_active_job, _job(5), True),
        # The same bytes read another way (docs/architecture.md, "Dedup, identity and
        # versions"): neither the latest version nor the active job answers.
        (
            "no dedup: another fingerprint than the version's",
            _with_version,
            replace(_job(5), fingerprint=b"f" * 32),
            True,
        ),
        (
            "no dedup: another fingerprint than the active job's",
            _with_active_job,
            replace(_job(5), fingerprint=b"f" * 32),
            True,
        ),
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
    if case.startswith("dedup against") or case == "fetch-format dedup":
        assert out.deduplicated
    if case.startswith("no dedup"):
        assert not out.deduplicated and out.job_id == job.job_id
    if case.startswith("blocklisted"):
        assert out.erased


# -- lease --------------------------------------------------------------------------------


async def _with_jobs(store: PostgresStore) -> None:
    other = Scope("t", "other")
    await store.jobs.enqueue(other, _job(1, fmt="csv"), now_us=NOW, dedup=False)
    await store.jobs.enqueue(
        SCOPE, _job(2, fmt="csv", source=OTHER_SOURCE), now_us=NOW + 1, dedup=False
    )
    await store.jobs.enqueue(SCOPE, _job(3, fmt="text"), now_us=NOW + 2, dedup=False)
    await store.jobs.enqueue(SCOPE, _job(4, fmt="text"), now_us=NOW + 10**12, dedup=False)


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
        return await store.jobs.lease_next(
            formats, scope=scope, worker_id="w1", now_us=NOW + 100, lease_us=LEASE_US
        )

    async def core(store: PostgresStore) -> Any:
        return await store.transaction(
            "lease job", core_jobs.lease, formats, scope, "w1", NOW + 100, LEASE_US
        )

    out, _ = await _same(envs, _with_jobs, fast, core)
    assert (out.job_id if out is not None else None) == (
        bytes([expected]) * 16 if expected is not None else None
    )


# -- single-shot commit -------------------------------------------------------------------


async def _leased(store: PostgresStore) -> None:
    await store.jobs.enqueue(SCOPE, _job(7), now_us=NOW, dedup=False)
    held = await store.jobs.lease_next(
        ["text"], scope=SCOPE, worker_id="w1", now_us=NOW, lease_us=LEASE_US
    )
    assert held is not None and held.job_id == _job(7).job_id


async def _child_leased(store: PostgresStore) -> None:
    """Job 7 is a child (an archive's member, say) of another job, and leased."""

    async def enqueue_child(tx: Any) -> Any:
        sid = await tx.scope_id(SCOPE)
        parent = b"p" * 16
        return await core_jobs.enqueue(
            tx, sid, _job(7), NOW, dedup=False, detail=f"parent={parent.hex()}", parent=parent
        )

    await store.transaction("enqueue child", enqueue_child)
    held = await store.jobs.lease_next(
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
    await store.versions.commit(
        SCOPE, version, _proj(b"old", NODE, b'{"v":0}'), dedup=Dedup.CONTENT
    )
    await _leased(store)


async def _streaming(store: PostgresStore, *, keep: bool) -> None:
    """A markdown job of SOURCE streams one partial part of a version with content hash HASH
    (the job's own hash is another); unless ``keep`` it is released (its stream abandoned:
    rows closed at their own start)."""
    job = _job(8, fmt="markdown", digest=b"m" * 32)
    await store.jobs.enqueue(SCOPE, job, now_us=NOW, dedup=False)
    held = await store.jobs.lease_next(
        ["markdown"], scope=SCOPE, worker_id="w2", now_us=NOW, lease_us=LEASE_US
    )
    assert held is not None and held.job_id == job.job_id
    lease = LeaseRef(job.job_id, held.lease_generation)
    version = NewVersion(SOURCE, "a.md", "markdown", HASH, 9, "w2", job.job_id)
    part = StreamPart(lease, "w2", 0, True, 0, NOW + 1, LEASE_US, stats=b"{}")
    await store.versions.apply_stream_part(SCOPE, version, _proj(b"streamed!"), part)
    if not keep:
        assert await store.jobs.release(lease, now_us=NOW + 2, detail="shutdown")


async def _abandoned_then_leased(store: PostgresStore) -> None:
    await _streaming(store, keep=False)
    await _leased(store)


async def _open_stream_then_leased(store: PostgresStore) -> None:
    await _streaming(store, keep=True)
    await _leased(store)


async def _retired_then_leased(store: PostgresStore) -> None:
    await _with_retired_version(store)
    await _leased(store)


async def _blocklisted_then_leased(store: PostgresStore) -> None:
    await _leased(store)
    await _with_blocklist(store)


_IDENTITY = b'{"format":"text","options":{},"parsers":{},"projection":1,"worker":"w1"}'


def _commit(
    text: bytes, node_id: bytes | None = None, identity: bytes | None = None
) -> tuple[Run, Run, list[bool]]:
    fingerprint = content_hash(identity) if identity is not None else None
    version = NewVersion(
        SOURCE, "a.txt", "text", HASH, len(text), "w1", _job(7).job_id, fingerprint, identity
    )
    proj = _proj(text, node_id)
    completion = JobCompletion(LeaseRef(_job(7).job_id, 1), NOW + 50, b'{"n":1}', (), "w1")
    answered: list[bool] = []

    async def fast(store: PostgresStore) -> Any:
        versions = store.versions
        orig = versions._commit_fast

        async def spy(*args: Any) -> CommitOutcome | None:
            got = await orig(*args)
            answered.append(got is not None)
            return got

        versions._commit_fast = spy  # type: ignore[method-assign]
        return await versions.commit(
            SCOPE, version, proj, dedup=Dedup.SUBMIT, completion=completion
        )

    async def core(store: PostgresStore) -> Any:
        canonical = content_hash(text)
        return await store.transaction(
            "commit version", core_versions.commit, SCOPE, version, proj, canonical,
            blob_id_for(canonical).bytes, Dedup.SUBMIT, completion,
        )  # fmt: skip

    return fast, core, answered


@pytest.mark.parametrize(
    ("case", "setup", "text", "node_id", "fast_answers"),
    [
        ("new", _leased, b"fresh text", None, True),
        ("new, with its identity", _leased, b"fresh text", None, True),
        ("new with an explicit id not yet written", _leased, b"fresh text", NODE, True),
        ("new after an abandoned stream", _abandoned_then_leased, b"fresh text", None, True),
        ("duplicate of another job's version", _version_then_leased, b"hello", None, False),
        ("a child job", _child_leased, b"fresh text", None, False),
        ("re-ingest: same bytes, other text", _version_then_leased, b"hello!", None, False),
        ("re-ingest of a retired source", _retired_then_leased, b"hello", None, False),
        ("a stream of the source is open", _open_stream_then_leased, b"fresh", None, False),
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
    # The fast path writes a version's identity beside telha_commit_single, in its transaction.
    identity = _IDENTITY if case.endswith("with its identity") else None
    fast, core, answered = _commit(text, node_id, identity)
    out, _ = await _same(envs, setup, fast, core)
    assert answered == [fast_answers]
    commit = out[0]
    assert commit.deduplicated == case.startswith("duplicate")
    assert commit.erased == case.startswith("blocklisted")
    if case.startswith("re-ingest"):
        assert commit.changes is not None
        assert commit.changes.added + commit.changes.changed + commit.changes.unchanged == 2
        if case != "re-ingest of a retired source":
            assert commit.changes.unchanged == 1  # the DOCUMENT root keeps its id
    if fast_answers:
        await _published_as_general_path_writes(envs[0].dsn, commit, node_id)


async def _published_as_general_path_writes(
    dsn: str, commit: CommitOutcome, explicit: bytes | None
) -> None:
    """What the fast path wrote has the columns the publish fills (the parity check compares
    them with the general path's; this checks they are not merely equally empty)."""
    assert commit.changes is not None
    assert (commit.changes.added, commit.changes.removed) == (2, 0)
    conn = await asyncpg.connect(dsn)
    try:
        tx = commit.source_version_tx
        version = await conn.fetchrow(
            "SELECT published_tx, root_node_id, changes FROM source_versions"
            " WHERE source_id = $1 AND tx = $2",
            SOURCE, tx,
        )  # fmt: skip
        assert version is not None
        assert version["published_tx"] == tx
        assert version["root_node_id"] == commit.node_ids[0]
        assert msgspec.json.decode(version["changes"]) == commit.changes.as_stats()
        keys = await conn.fetch(
            "SELECT node_id, match_key FROM nodes WHERE tx_from = $1 ORDER BY node_id", tx
        )
        assert {r["node_id"]: r["match_key"] is not None for r in keys} == {
            commit.node_ids[0]: True,
            commit.node_ids[1]: explicit is None,
        }
        edges = await conn.fetch("SELECT source_id FROM edges WHERE tx_from = $1", tx)
        assert [r["source_id"] for r in edges] == [SOURCE]
        job = await conn.fetchrow("SELECT stats FROM jobs WHERE job_id = $1", _job(7).job_id)
        assert job is not None
        assert msgspec.json.decode(job["stats"]) == {"n": 1, **commit.changes.as_stats()}
        detail = await conn.fetchval(
            "SELECT detail FROM job_events WHERE job_id = $1 ORDER BY seq DESC LIMIT 1",
            _job(7).job_id,
        )
        assert detail == f"version={tx} nodes=2 {commit.changes.detail()}"
    finally:
        await conn.close()


# -- the row types ------------------------------------------------------------------------


async def test_commit_row_types_are_the_general_paths_columns() -> None:
    """Each array ``telha_commit_single`` takes is of a row type whose fields are, in order,
    the columns :data:`~telha.storage.core.row_tables.ROW_TABLES` gives the general path (the
    tuples of :func:`telha.domain.rows.build_rows`): the types stand in a shipped migration,
    the columns in Python, and the two must not drift."""
    require_engine("postgres")
    dsn = create_database()
    store = PostgresStore(dsn, pool_size=1)
    await store.open()
    await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        args = {
            r["name"]: r["type"]
            for r in await conn.fetch(
                "SELECT x.name, x.type FROM pg_proc p,"
                " unnest(p.proargnames, p.proargtypes::oid[]) AS x(name, type)"
                " WHERE p.proname = 'telha_commit_single'"
            )
        }
        for t in ROW_TABLES:
            element = await conn.fetchval(
                "SELECT typelem FROM pg_type WHERE oid = $1", args[f"p_{t.field}"]
            )
            fields = [
                (r["attname"], r["type"])
                for r in await conn.fetch(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type"
                    " FROM pg_attribute a JOIN pg_type ty ON ty.typrelid = a.attrelid"
                    " WHERE ty.oid = $1 AND a.attnum > 0 AND NOT a.attisdropped"
                    " ORDER BY a.attnum",
                    element,
                )
            ]
            columns = [
                (name, await conn.fetchval("SELECT $1::regtype::text", pg_type))
                for name, pg_type in t.columns
            ]
            assert fields == columns, t.table
    finally:
        await conn.close()
