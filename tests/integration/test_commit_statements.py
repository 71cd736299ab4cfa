"""A single shot's commit asks for its source's published versions once (bench/RESULTS.md,
"Fewer statements per job"): the latest version it dedups against is passed on to the match,
the kept edges, the publish, the search index's entry and the archive rule of the same
transaction, which read it again before. Counted on a real SQLite store through
``sqlite3``'s trace callback on the writer's connection, for a source's first version and
for a second that supersedes it; the second still supersedes the first (its rows replace
the first's, as the kept-edges tests check in detail). The erasure blocklist is asked in the
same statement, by the commit and by an enqueue with dedup (bench/RESULTS.md, "Fourth
round"), and an enqueue of a lease head the writer has seen does not read it again."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from telha.domain.ids import content_hash, new_id
from telha.domain.model import Dedup, NewJob, NewVersion, Scope
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
SOURCE = b"s" * 16


def _proj(text: str) -> Projection:
    """A root node and a node per word, an edge from the root to each."""
    words = text.split()
    nodes = [NodeOut(("DOC",), b"{}", (0,))]
    nodes += [
        NodeOut(("WORD",), msgspec.json.encode({"w": w}), (i + 1,)) for i, w in enumerate(words)
    ]
    spans = [SpanOut(0, len(text), "body")] + [SpanOut(0, 1, "word") for _ in words]
    edges = [EdgeOut("HAS", 0, i + 1, b"{}") for i in range(len(words))]
    return Projection(text.encode(), spans, nodes, edges)


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "t.db") as opened:
        yield opened


async def _traced_commit(store: SqliteStore, text: str) -> list[str]:
    """Commit ``text`` as the source's next version; the writer's statements meanwhile."""
    seen: list[str] = []
    writer = store._writer
    assert writer is not None

    def trace(on: bool) -> None:  # on the writer's own thread
        writer._conn.set_trace_callback(seen.append if on else None)

    raw = text.encode()
    version = NewVersion(SOURCE, "a.txt", "text", content_hash(raw), len(raw), "w", None)
    await writer._execute(trace, True)
    try:
        out = await store.versions.commit(SCOPE, version, _proj(text), dedup=Dedup.CONTENT)
    finally:
        await writer._execute(trace, False)
    assert out.source_version_tx is not None
    return seen


def _published_reads(statements: list[str]) -> list[str]:
    """The reads that ask which of the source's versions are published."""
    return [
        s
        for s in statements
        if s.lstrip().upper().startswith("SELECT") and "published_tx IS NOT NULL" in s
    ]


def _blocklist_reads(statements: list[str]) -> list[str]:
    """The reads of the erasure blocklist."""
    return [s for s in statements if "FROM erasure_blocklist" in s]


async def _traced_enqueue(store: SqliteStore, raw: bytes) -> list[str]:
    """Enqueue a job of ``raw`` for :data:`SOURCE` with dedup; the writer's statements."""
    seen: list[str] = []
    writer = store._writer
    assert writer is not None

    def trace(on: bool) -> None:  # on the writer's own thread
        writer._conn.set_trace_callback(seen.append if on else None)

    job = NewJob(new_id(), "ingest:text", "text", SOURCE, content_hash(raw), b"{}")
    await writer._execute(trace, True)
    try:
        out = await store.jobs.enqueue(SCOPE, job, now_us=1_000, dedup=True)
    finally:
        await writer._execute(trace, False)
    assert out.job_id == job.job_id and not out.deduplicated
    return seen


async def test_an_enqueue_reads_the_blocklist_and_latest_version_at_once(
    sqlite_store: SqliteStore,
) -> None:
    await _traced_commit(sqlite_store, "alpha beta gamma")
    first = await _traced_enqueue(sqlite_store, b"one")
    assert len(_published_reads(first)) == 1, _published_reads(first)
    assert _blocklist_reads(first) == _published_reads(first)
    second = await _traced_enqueue(sqlite_store, b"two")
    assert [s for s in first if "lease_heads" in s]  # the head read and written once
    assert not [s for s in second if "lease_heads" in s], second


@pytest.mark.parametrize("versions", [1, 2])
async def test_a_single_shot_reads_its_sources_versions_once(
    sqlite_store: SqliteStore, versions: int
) -> None:
    texts = ["alpha beta gamma", "alpha beta delta"][:versions]
    for text in texts[:-1]:
        await _traced_commit(sqlite_store, text)
    statements = await _traced_commit(sqlite_store, texts[-1])
    assert len(_published_reads(statements)) == 1, _published_reads(statements)
    assert _blocklist_reads(statements) == _published_reads(statements)
    assert any(s.startswith("BEGIN") for s in statements)  # the trace saw the transaction
    latest = await sqlite_store.versions.latest(SCOPE, SOURCE)
    assert latest is not None and latest.content_hash == content_hash(texts[-1].encode())


async def test_the_second_version_supersedes_the_first(sqlite_store: SqliteStore) -> None:
    await _traced_commit(sqlite_store, "alpha beta gamma")
    await _traced_commit(sqlite_store, "alpha beta delta")

    def open_words(conn: sqlite3.Connection) -> list[str]:
        rows = conn.execute(
            "SELECT properties FROM nodes WHERE tx_to IS NULL AND labels LIKE '%WORD%'"
        ).fetchall()
        return sorted(msgspec.json.decode(r[0])["w"] for r in rows)

    writer = sqlite_store._writer
    assert writer is not None
    assert await writer._execute(open_words, writer._conn) == ["alpha", "beta", "delta"]
