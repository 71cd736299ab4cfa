"""Erasure at the storage level, on both engines (:mod:`telha.storage.erasure.steps`): the
span-row scans read in pages and the node reads in batches, here far smaller than the
defaults so they turn over many times; an erasure then counts and leaves exactly what one
page and one batch do. A node the erased source shares with a surviving source is trimmed,
the others are hidden, and nothing an erasure removes is left."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from telha.domain.erasure import ERASE_FORMAT, ERASE_KIND, STEPS, ErasePayload
from telha.domain.ids import new_id
from telha.domain.model import Dedup, LeaseRef, NewJob, NewVersion, Scope
from telha.domain.projection import EdgeOut, NodeOut, Projection, SpanOut
from telha.storage.erasure import steps as erasure
from telha.storage.versions import streams

pytestmark = pytest.mark.anyio

SHARED = 6  # nodes the erased source shares with the surviving one
OWN = 7  # nodes only the erased source wrote
FILLER = 11  # spans of the surviving source that link nothing shared


def _projection(nodes: list[tuple[bytes, bytes]], filler: int) -> Projection:
    """One span per node (``(node_id, properties)``), then ``filler`` spans of their own."""
    n = len(nodes) + filler
    text = b"".join(b"x%03d\n" % i for i in range(n))
    spans = [SpanOut(5 * i, 5 * i + 4, "line") for i in range(n)]
    outs = [NodeOut(("THING",), props, (i,), node_id) for i, (node_id, props) in enumerate(nodes)]
    edges = [EdgeOut("NEXT", i, i + 1) for i in range(len(nodes) - 1)]
    return Projection(text, spans, outs, edges)


async def _commit(store: Any, scope: Scope, source: bytes, proj: Projection) -> int:
    v = NewVersion(source, "doc.json", "json", new_id() * 2, len(proj.canonical), "t")
    out = await store.versions.commit(scope, v, proj, dedup=Dedup.NONE)
    assert out.source_version_tx is not None
    return int(out.source_version_tx)


async def _erase(store: Any, scope: Scope, source: bytes) -> dict[str, int]:
    payload = ErasePayload(source_id=str(uuid.UUID(bytes=source)), reason="test", principal="p")
    job = NewJob(new_id(), ERASE_KIND, ERASE_FORMAT, source, None, msgspec.json.encode(payload))
    await store.erasure.enqueue(scope, job, payload, now_us=1)
    held = await store.jobs.lease_next(
        [ERASE_FORMAT], scope=scope, worker_id="w", now_us=2, lease_us=60_000_000
    )
    assert held is not None and held.job_id == job.job_id
    lease = LeaseRef(held.job_id, held.lease_generation)
    counts: dict[str, int] = {}
    for step in STEPS[:-1]:
        counts.update(await store.erasure.step(lease, step, now_us=3))
    # A recorded step answers its counts again without running.
    assert await store.erasure.step(lease, "nodes", now_us=4) == {
        k: counts[k] for k in ("hidden", "trimmed", "edges")
    }
    assert await store.erasure.step(lease, "finish", now_us=5) == counts
    return counts


async def _scenario(store: Any, scope: Scope) -> tuple[dict[str, int], list[Any]]:
    ids = [new_id() for _ in range(SHARED + OWN)]
    erased, kept = new_id(), new_id()
    await _commit(store, scope, erased, _projection([(i, b'{"a":1}') for i in ids], 0))
    shared = [(i, b'{"a":1}') for i in ids[:SHARED]]
    await _commit(store, scope, kept, _projection(shared, FILLER))
    counts = await _erase(store, scope, erased)
    nodes = []
    for i in ids:
        node = await store.reads.node(scope, i, None)
        nodes.append(None if node is None else (node.labels, node.properties))
    return counts, nodes


async def test_paged_erasure_matches_one_page(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = await _scenario(store, Scope("t", "whole"))
    monkeypatch.setattr(erasure, "_PAGE", 2)
    monkeypatch.setattr(erasure, "_BATCH", 3)
    paged = await _scenario(store, Scope("t", "paged"))
    assert paged == whole
    counts, nodes = whole
    assert counts["versions"] == 1 and counts["jobs"] == 0
    assert counts["hidden"] == OWN and counts["trimmed"] == SHARED
    assert counts["span_rows"] == SHARED + OWN and counts["edges"] == SHARED + OWN - 1
    assert nodes == [(["THING"], {"a": 1})] * SHARED + [None] * OWN
    assert await store.erasure.leftovers() == dict.fromkeys(await store.erasure.leftovers(), 0)


async def _scope_id(tx: Any, scope: Scope) -> int | None:
    return await tx.known_scope_id(scope)


async def test_purge_stream_leaves_nothing_of_the_version(store: Any) -> None:
    scope, source, other = Scope("t", "purge"), new_id(), new_id()
    ids = [new_id() for _ in range(3)]
    kept = await _commit(store, scope, other, _projection([(new_id(), b"{}")], 1))
    pinned = await _commit(store, scope, source, _projection([(i, b"{}") for i in ids], 2))
    sid = await store.read(_scope_id, scope)
    await store.transaction("purge stream", streams.purge_stream, sid, source, pinned)
    assert await store.reads.versions(scope, source) == []
    assert not await store.reads.has_source(scope, source)
    assert [await store.reads.node(scope, i, None) for i in ids] == [None] * 3
    assert [v.tx for v in await store.reads.versions(scope, other)] == [kept]
    assert len(await store.reads.span_rows(scope, other, kept)) == 2
