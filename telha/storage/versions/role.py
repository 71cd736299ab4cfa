"""The version aggregate's role (docs/architecture.md, "The storage seam"): a store's
``versions``. Part of :class:`telha.storage.protocol.Storage`, which re-exports it."""

from __future__ import annotations

from typing import Protocol

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
from telha.storage.versions.publish import RetireOutcome
from telha.storage.versions.reproject import ReprojectRow

__all__ = ["VersionStore"]


class VersionStore(Protocol):
    """Source versions, a store's ``versions``
    (:class:`~telha.storage.versions.aggregate.Versions`): the Ingestor's synchronous commits
    and worker submissions, single-shot or streamed part by part; the retire of a source
    (``DELETE /v1/sources/{sourceId}``); the current versions re-projection walks."""

    async def latest(self, scope: Scope, source_id: bytes) -> SourceVersion | None:
        """The newest version of a source, or ``None`` for a new source."""

    async def commit(
        self,
        scope: Scope,
        version: NewVersion,
        projection: Projection,
        *,
        dedup: Dedup,
        completion: JobCompletion | None = None,
    ) -> CommitOutcome:
        """Write one source version and its projection in one transaction: version row,
        canonical text chunks, nodes (deterministic ids through the upsert ladder), edges, span
        rows, and with ``completion`` the job's completion and its child jobs.

        ``dedup`` is checked inside the same transaction; a duplicate writes no version
        (``CommitOutcome.deduplicated``) but still completes the job. All-or-nothing.

        :raises StaleLease: ``completion`` names a job not held under that lease generation.
        """

    async def stream_base(self, job_id: bytes, lease: LeaseRef, worker_id: str) -> int:
        """Bytes of canonical text the job's live stream (of this lease and worker) holds."""

    async def apply_stream_part(
        self, scope: Scope, version: NewVersion, projection: Projection, part: StreamPart
    ) -> StreamOutcome:
        """Apply one streamed submission in one transaction.

        :raises telha.domain.errors.StaleLease: the lease is not current.
        :raises telha.domain.errors.OutOfSync: wrong seq, or a partial built on another length.
        :raises telha.domain.errors.InvalidStream: an offset into earlier text off a boundary.
        """

    async def retire(self, scope: Scope, source_id: bytes, reason: str | None) -> RetireOutcome:
        """Close, at a new tx, everything only this source supports and mark its current
        version retired (:func:`telha.storage.versions.publish.retire`); retiring again
        answers the first retire. Bytes and history stay (this is not erasure).

        :raises NotFound: no such source (no published version) in ``scope``.
        :raises Conflict: the source is being erased, or its current version was erased.
        """

    async def current(
        self, scope: Scope, fmt: str | None, source_id: bytes | None, after: bytes, limit: int
    ) -> list[ReprojectRow]:
        """Up to ``limit`` current versions of ``scope`` (neither retired nor erased) with
        a source id above ``after``, in source id order, of format ``fmt`` and source
        ``source_id`` when given (:func:`telha.storage.versions.reproject.current_versions`)."""
