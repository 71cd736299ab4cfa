"""Archive members on the store itself, on both engines (telha.storage.versions.members): an
archive's version whose MANIFEST no longer CONTAINS a member's FILE retires that member
source in the publish's transaction — a single-shot commit and a stream's finalize alike;
an unpublished stream retires nothing; a FILE another source wrote is left alone; a member
applied after its archive dropped it is retired at its own publish; a source that is no
archive is untouched."""

from __future__ import annotations

import msgspec
import pytest

from telha.domain.ids import content_hash, new_id
from telha.domain.model import (
    Dedup,
    JobCompletion,
    LeaseRef,
    NewJob,
    NewVersion,
    Scope,
    StreamPart,
)
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.storage import StorageEngine
from telha.storage.core.tx import Tx
from telha.storage.versions.members import REASON

pytestmark = pytest.mark.anyio

SCOPE = Scope("t", "o")
NOW = 1_000_000_000_000
ARCHIVE = b"A" * 16
MANIFEST = b"M" * 16
PATHS = ("pkg/a.py", "pkg/b.py", "pkg/c.py")
MEMBER = {p: bytes([i + 1]) * 16 for i, p in enumerate(PATHS)}  # member source ids
FILE = {p: bytes([i + 0x41]) * 16 for i, p in enumerate(PATHS)}  # FILE node ids


def _job(fmt: str, source: bytes, raw: bytes, name: str) -> NewJob:
    payload = msgspec.json.encode({"name": name})
    return NewJob(new_id(), f"ingest:{fmt}", fmt, source, content_hash(raw), payload)


async def _lease(store: StorageEngine, fmt: str) -> tuple[LeaseRef, bytes]:
    """The next pending job of ``fmt``, leased; its lease and source id."""
    held = await store.jobs.lease_next(
        [fmt], scope=SCOPE, worker_id="w", now_us=NOW, lease_us=10**9
    )
    assert held is not None
    return LeaseRef(held.job_id, held.lease_generation), held.source_id


def _manifest(paths: list[str]) -> Projection:
    text = "\n".join(paths).encode()
    spans, pos = [], 0
    for p in paths:
        spans.append(SpanOut(pos, pos + len(p), "body"))
        pos += len(p) + 1
    props = msgspec.json.encode({"files": paths})
    node = NodeOut(("MANIFEST",), props, tuple(range(len(paths))), MANIFEST)
    edges = [
        EdgeOut("CONTAINS", 0, None, msgspec.json.encode({"path": p}), to_id=FILE[p]) for p in paths
    ]
    return Projection(text, spans, [node], edges)


def _raw(paths: list[str]) -> bytes:
    return ("archive:" + ",".join(paths)).encode()


async def _archive(store: StorageEngine, paths: list[str], children: bool = True) -> int:
    """Commit a new archive version holding ``paths`` (with a child job per path); its tx."""
    raw = _raw(paths)
    job = _job("code", ARCHIVE, raw, "repo.zip")
    await store.jobs.enqueue(SCOPE, job, now_us=NOW, dedup=False)
    lease, _ = await _lease(store, "code")
    kids = tuple(_job("member", MEMBER[p], p.encode(), f"repo.zip/{p}") for p in paths)
    version = NewVersion(ARCHIVE, "repo.zip", "code", content_hash(raw), len(raw), "w", job.job_id)
    done = JobCompletion(lease, NOW, b"{}", kids if children else (), "w")
    out = await store.versions.commit(
        SCOPE, version, _manifest(paths), dedup=Dedup.NONE, completion=done
    )
    assert out.source_version_tx is not None
    return out.source_version_tx


async def _apply_members(store: StorageEngine, count: int) -> dict[bytes, int]:
    """Lease and commit ``count`` pending member jobs (each writes its FILE); member source →
    version tx."""
    out = {}
    for _ in range(count):
        lease, source = await _lease(store, "member")
        path = next(p for p, s in MEMBER.items() if s == source)
        text = f"# {path}\n".encode()
        proj = Projection(
            text,
            [SpanOut(0, len(text), "code")],
            [NodeOut(("FILE",), msgspec.json.encode({"path": path}), (0,), FILE[path])],
        )
        version = NewVersion(
            source, f"repo.zip/{path}", "member", content_hash(text), 1, "w", lease.job_id
        )
        done = JobCompletion(lease, NOW, b"{}", (), "w")
        committed = await store.versions.commit(
            SCOPE, version, proj, dedup=Dedup.NONE, completion=done
        )
        assert committed.source_version_tx is not None
        out[source] = committed.source_version_tx
    return out


async def _retired(store: StorageEngine, source: bytes) -> list[tuple[int | None, str | None]]:
    async def op(tx: Tx) -> list[tuple[int | None, str | None]]:
        rows = await tx.fetchall(
            "SELECT retired_tx, retire_reason FROM source_versions WHERE source_id = ?"
            " AND retired_tx IS NOT NULL",
            source,
        )
        return [(r[0], r[1]) for r in rows]

    return await store.read(op)  # type: ignore[attr-defined,no-any-return]


async def _current(store: StorageEngine, path: str, as_of: int | None = None) -> bool:
    return await store.reads.node(SCOPE, FILE[path], as_of) is not None


async def test_single_shot_retires_the_dropped_member(store: StorageEngine) -> None:
    await _archive(store, list(PATHS))
    applied = await _apply_members(store, 3)
    tx2 = await _archive(store, ["pkg/a.py", "pkg/c.py"], children=False)
    assert not await _current(store, "pkg/b.py")
    assert await _current(store, "pkg/b.py", applied[MEMBER["pkg/b.py"]])
    assert await _current(store, "pkg/a.py") and await _current(store, "pkg/c.py")
    assert await _retired(store, MEMBER["pkg/b.py"]) == [(tx2, REASON)]
    assert await _retired(store, MEMBER["pkg/a.py"]) == []
    # The same archive again (nothing dropped): nothing more retired.
    await _archive(store, ["pkg/a.py", "pkg/c.py"], children=False)
    assert await _retired(store, MEMBER["pkg/b.py"]) == [(tx2, REASON)]
    assert await _current(store, "pkg/a.py")


async def test_stream_finalize_retires_and_an_open_stream_does_not(store: StorageEngine) -> None:
    await _archive(store, list(PATHS))
    await _apply_members(store, 3)
    raw = _raw(["pkg/c.py"])
    job = _job("code", ARCHIVE, raw, "repo.zip")
    await store.jobs.enqueue(SCOPE, job, now_us=NOW, dedup=False)
    lease, _ = await _lease(store, "code")
    version = NewVersion(ARCHIVE, "repo.zip", "code", content_hash(raw), len(raw), "w", job.job_id)
    first = _manifest(["pkg/c.py"])
    part = StreamPart(lease, "w", 0, True, 0, NOW, 10**9)
    await store.versions.apply_stream_part(SCOPE, version, first, part)
    for p in PATHS:  # not published: the old members all stand
        assert await _current(store, p), p
    end = len(first.canonical)
    last = StreamPart(lease, "w", 1, False, end, NOW + 1, 10**9, content_hash(raw), b"{}")
    done = await store.versions.apply_stream_part(SCOPE, version, Projection(b"", base=end), last)
    assert done.finalized
    assert not await _current(store, "pkg/a.py") and not await _current(store, "pkg/b.py")
    assert await _current(store, "pkg/c.py")
    (a_retired,) = await _retired(store, MEMBER["pkg/a.py"])
    assert a_retired[1] == REASON and a_retired == (await _retired(store, MEMBER["pkg/b.py"]))[0]


async def test_late_members_retire_and_other_sources_stay(store: StorageEngine) -> None:
    await _archive(store, list(PATHS))
    await _apply_members(store, 1)  # a.py applied; b.py and c.py still pending
    # c.py's FILE id written first by a source that is no member of this archive.
    other = b"O" * 16
    text = b"# elsewhere\n"
    proj = Projection(
        text,
        [SpanOut(0, len(text), "code")],
        [NodeOut(("FILE",), b'{"path":"elsewhere"}', (0,), FILE["pkg/c.py"])],
    )
    await store.versions.commit(
        SCOPE, NewVersion(other, "elsewhere.py", "code", content_hash(text), 1, "w"), proj,
        dedup=Dedup.NONE,
    )  # fmt: skip
    await _archive(store, ["pkg/a.py"], children=False)
    assert await _current(store, "pkg/a.py") and await _current(store, "pkg/c.py")
    assert await _retired(store, other) == []
    # b.py's and c.py's jobs apply afterwards: their archive dropped them meanwhile, so each
    # member is retired right after its own publish.
    applied = await _apply_members(store, 2)
    for path in ("pkg/b.py", "pkg/c.py"):
        member = MEMBER[path]
        assert [r[1] for r in await _retired(store, member)] == [REASON], path
        assert await _current(store, path, applied[member]), path  # published, then retired
    assert not await _current(store, "pkg/b.py")
    assert await _retired(store, other) == [] and await _current(store, "pkg/a.py")


async def test_a_source_that_is_no_archive_is_untouched(store: StorageEngine) -> None:
    """A document (no MANIFEST) whose new version drops its CONTAINS edge to a member's FILE
    retires nothing."""
    await _archive(store, list(PATHS))
    await _apply_members(store, 3)
    source = b"D" * 16
    for n, text in enumerate((b"one\n", b"two\n")):
        proj = Projection(
            text,
            [SpanOut(0, len(text), "paragraph")],
            [NodeOut(("DOCUMENT",), b"{}", (0,))],
            [EdgeOut("CONTAINS", 0, None, to_id=FILE["pkg/a.py"])] if n == 0 else [],
        )
        version = NewVersion(source, "d.md", "markdown", content_hash(text), 4, "w")
        await store.versions.commit(SCOPE, version, proj, dedup=Dedup.NONE)
    assert await _retired(store, MEMBER["pkg/a.py"]) == [] and await _current(store, "pkg/a.py")
