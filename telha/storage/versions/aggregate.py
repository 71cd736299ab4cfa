"""The version aggregate of a store (``store.versions``): a source's latest version, the
commit of a submission or an upload, streamed submissions part by part, the retire of a
source and the current versions re-projection walks, each one transaction or one read of
the engine's runners over :mod:`telha.storage.versions.commit`,
:mod:`telha.storage.versions.streams`, :mod:`telha.storage.versions.retire` and
:mod:`telha.storage.versions.reproject` (:class:`telha.storage.versions.role.VersionStore`
is its contract; docs/architecture.md, "The storage seam").

An engine may make it a subclass that answers the commit with a measured fast path
(:meth:`Versions._commit_fast`; PostgreSQL's
:class:`~telha.storage.postgres.fast.FastVersions`), held to the same rows by a parity
test."""

from __future__ import annotations

from telha.domain.identity import match_keys
from telha.domain.ids import blob_id_for, content_hash
from telha.domain.model import (
    CommitOutcome,
    Dedup,
    JobCompletion,
    LeaseRef,
    NewVersion,
    Scope,
    SourceVersion,
    StreamOutcome,
    StreamPart,
)
from telha.domain.projection import Projection
from telha.offload import OFFLOAD_BYTES, off_loop
from telha.storage.core.engine import EngineOps
from telha.storage.reads.graph import source_versions
from telha.storage.versions import streams
from telha.storage.versions.commit import commit, has_version
from telha.storage.versions.publish import RetireOutcome
from telha.storage.versions.reproject import ReprojectRow, current_versions
from telha.storage.versions.retire import retire_source

__all__ = ["Versions"]


class Versions:
    """A component the store composes, not a mixin: ``engine`` runs each operation."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def latest(self, scope: Scope, source_id: bytes) -> SourceVersion | None:
        """A source's latest finalized version, or ``None`` (see
        :func:`telha.storage.reads.graph.source_versions`)."""
        versions = await self._engine.read(source_versions, scope, source_id, True)
        return versions[0] if versions else None

    async def commit(
        self,
        scope: Scope,
        version: NewVersion,
        projection: Projection,
        *,
        dedup: Dedup,
        completion: JobCompletion | None = None,
    ) -> CommitOutcome:
        """See :func:`telha.storage.versions.commit.commit` (the canonical text is hashed, and
        the match keys of a large projection whose source has a version computed, off the
        event loop first; a first version defers its keys,
        :func:`telha.storage.versions.publish.match`). A small one (under
        :data:`~telha.offload.OFFLOAD_BYTES` of text) skips that read: the match computes its
        keys inside the transaction if the source has a version, a cost below the read's
        (bench/RESULTS.md, "Per-job cuts"); the rows written are the same."""
        text = projection.canonical
        canonical_hash = await off_loop(len(text), content_hash, text)
        if len(text) >= OFFLOAD_BYTES and await self._engine.read(
            has_version, scope, version.source_id
        ):
            await off_loop(len(text), match_keys, projection)  # kept on the projection
        blob_id = blob_id_for(canonical_hash).bytes
        fast = await self._commit_fast(
            scope, version, projection, canonical_hash, blob_id, dedup, completion
        )
        if fast is not None:
            return fast
        return await self._engine.transaction(
            "commit version", commit, scope, version, projection, canonical_hash, blob_id,
            dedup, completion,
        )  # fmt: skip

    async def _commit_fast(
        self,
        scope: Scope,
        version: NewVersion,
        projection: Projection,
        canonical_hash: bytes,
        blob_id: bytes,
        dedup: Dedup,
        completion: JobCompletion | None,
    ) -> CommitOutcome | None:
        """An engine's fast path for the commit: its outcome, or ``None`` (nothing written)
        to take :func:`telha.storage.versions.commit.commit`. None here."""
        return None

    async def stream_base(self, job_id: bytes, lease: LeaseRef, worker_id: str) -> int:
        """See :func:`telha.storage.versions.streams.stream_base`."""
        return await self._engine.read(streams.stream_base, job_id, lease, worker_id)

    async def apply_stream_part(
        self, scope: Scope, version: NewVersion, projection: Projection, part: StreamPart
    ) -> StreamOutcome:
        """See :func:`telha.storage.versions.streams.apply_stream_part` (the part's match keys
        are computed off the event loop first)."""
        await off_loop(len(projection.canonical), match_keys, projection)
        return await self._engine.transaction(
            "apply streamed submission", streams.apply_stream_part, scope, version,
            projection, part,
        )  # fmt: skip

    async def retire(self, scope: Scope, source_id: bytes, reason: str | None) -> RetireOutcome:
        """See :func:`telha.storage.versions.retire.retire_source`."""
        return await self._engine.transaction(
            "retire source", retire_source, scope, source_id, reason
        )

    async def current(
        self,
        scope: Scope,
        fmt: str | None,
        source_id: bytes | None,
        after: bytes,
        limit: int,
    ) -> list[ReprojectRow]:
        """See :func:`telha.storage.versions.reproject.current_versions`."""
        return await self._engine.read(current_versions, scope, fmt, source_id, after, limit)
