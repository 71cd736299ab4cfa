"""The one dedup rule at the store, on each engine and through each enqueue path (PostgreSQL's
``telha_enqueue`` function and the general path a pending-jobs quota takes;
docs/architecture.md, "Dedup, identity and versions"): request-level dedup matches the
latest version and an active job only with the same bytes *and* fingerprint; a commit of the
same bytes read another way is a new version with its reason; a retired source's bytes make
a new version."""

from __future__ import annotations

from dataclasses import replace

import pytest

from telha.domain.dedup import identity_of
from telha.domain.ids import content_hash, new_id
from telha.domain.model import Dedup, NewJob, NewVersion, Scope
from telha.domain.projection import NodeOut, Projection, SpanOut
from telha.storage import StorageEngine
from workers_common.projection import ProjectionSpec

pytestmark = pytest.mark.anyio

SCOPE = Scope("identity-tenant", "org")
NOW = 1_800_000_000_000_000
RAW = b"a,b\n1,2\n"
SPEC = ProjectionSpec("tabular_worker", 1, {"polars": "2.1.0"})
ONE = identity_of(SPEC, "csv", {})
OTHER = identity_of(SPEC, "csv", {"encoding": "cp1251"})
NEWER = identity_of(replace(SPEC, version=2), "csv", {})
#: OTHER's options read by the newer projection.
NEWER_OTHER = identity_of(replace(SPEC, version=2), "csv", {"encoding": "cp1251"})


def _job(source: bytes, fingerprint: bytes | None) -> NewJob:
    return NewJob(new_id(), "ingest:csv", "csv", source, content_hash(RAW), b"{}",
                  name="t.csv", fingerprint=fingerprint)  # fmt: skip


def _version(source: bytes, ident: object) -> NewVersion:
    assert hasattr(ident, "fingerprint")
    return NewVersion(source, "t.csv", "csv", content_hash(RAW), len(RAW), "tabular_worker",
                      None, ident.fingerprint, ident.json)  # type: ignore[attr-defined]  # fmt: skip


def _proj(text: str) -> Projection:
    data = text.encode()
    return Projection(data, [SpanOut(0, len(data), "body")], [NodeOut(("DOC",), b"{}", (0,))])


@pytest.mark.parametrize("max_pending", [0, 1000], ids=["fast", "general"])
async def test_enqueue_matches_bytes_and_fingerprint(
    store: StorageEngine, max_pending: int
) -> None:
    source = new_id()
    first = await store.jobs.enqueue(SCOPE, _job(source, ONE.fingerprint), now_us=NOW,
                                    dedup=True, max_pending=max_pending)  # fmt: skip
    assert not first.deduplicated
    same = await store.jobs.enqueue(SCOPE, _job(source, ONE.fingerprint), now_us=NOW + 1,
                                   dedup=True, max_pending=max_pending)  # fmt: skip
    assert same.deduplicated and same.job_id == first.job_id  # the active job answers
    other = await store.jobs.enqueue(SCOPE, _job(source, OTHER.fingerprint), now_us=NOW + 2,
                                    dedup=True, max_pending=max_pending)  # fmt: skip
    assert not other.deduplicated and other.job_id != first.job_id

    # Against the latest version: the same identity deduplicates, another does not.
    committed = new_id()
    await store.versions.commit(SCOPE, _version(committed, ONE), _proj("x"), dedup=Dedup.CONTENT)
    hit = await store.jobs.enqueue(SCOPE, _job(committed, ONE.fingerprint), now_us=NOW + 3,
                                  dedup=True, max_pending=max_pending)  # fmt: skip
    assert hit.deduplicated and hit.job_id is None
    miss = await store.jobs.enqueue(SCOPE, _job(committed, NEWER.fingerprint), now_us=NOW + 4,
                                   dedup=True, max_pending=max_pending)  # fmt: skip
    assert not miss.deduplicated

    # A retired source never matches: its bytes make a new version.
    await store.versions.retire(SCOPE, committed, None)
    back = await store.jobs.enqueue(SCOPE, _job(committed, ONE.fingerprint), now_us=NOW + 5,
                                   dedup=True, max_pending=max_pending)  # fmt: skip
    assert not back.deduplicated


async def test_commit_reasons_and_identity_read_back(store: StorageEngine) -> None:
    source = new_id()
    first = await store.versions.commit(SCOPE, _version(source, ONE), _proj("x"),
                                       dedup=Dedup.CONTENT)  # fmt: skip
    again = await store.versions.commit(SCOPE, _version(source, ONE), _proj("x"),
                                       dedup=Dedup.CONTENT)  # fmt: skip
    assert not first.deduplicated and again.deduplicated
    for ident, text in ((OTHER, "y"), (NEWER_OTHER, "y")):
        out = await store.versions.commit(SCOPE, _version(source, ident), _proj(text),
                                         dedup=Dedup.CONTENT)  # fmt: skip
        assert not out.deduplicated
    newer, other, one = await store.reads.versions(SCOPE, source)
    assert [v.reason for v in (one, other, newer)] == [None, "options", "projection"]
    assert [v.fingerprint for v in (one, other, newer)] == [
        ONE.fingerprint, OTHER.fingerprint, NEWER_OTHER.fingerprint,
    ]  # fmt: skip
    assert newer.identity == NEWER_OTHER.json
