"""The retention aggregate of a store (``store.retention``; docs/operations.md, "Retention")."""

from __future__ import annotations

from telha.domain.row_faults import RowFault
from telha.storage.core.engine import EngineOps
from telha.storage.retention.passes import (
    BLOBS_PER_READ,
    CHUNKS_PER_TX,
    JOBS_PER_TX,
    BlobCandidate,
    JobKey,
    RetentionResult,
    blob_candidates,
    count_jobs,
    remove_blob,
    remove_jobs,
)

__all__ = ["StoreRetention"]


class StoreRetention:
    """The retention aggregate of a store (``store.retention``; its contract:
    :class:`telha.storage.retention.role.RetentionStore`), over ``engine``'s runners. A
    component the store composes, not a mixin (named apart from the actor that runs its
    passes, :class:`telha.retention.collector.Retention`)."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def remove_ended(
        self,
        *,
        before_us: int,
        after: JobKey | None = None,
        batch: int = JOBS_PER_TX,
        dry_run: bool = False,
    ) -> RetentionResult:
        """Remove the jobs that ended before ``before_us`` (µs) and that no version names,
        then the raw blobs written before it that nothing staying names (module docstring):
        jobs ``batch`` per transaction, from ``after`` on (the key an earlier pass returned;
        ``None``: every ended job). ``dry_run``: count, remove nothing.

        :raises StorageError: the driver failed; what earlier transactions removed stays
            removed (each is whole), a later pass finishes.
        """
        if dry_run:
            jobs, events, payload = await self._engine.read(count_jobs, before_us)
            blobs, size = await self._blobs(before_us, remove=False)
            return RetentionResult(jobs, events, blobs, size, payload)
        jobs = events = payload = 0
        faults: list[RowFault] = []
        key = after
        while True:
            done = await self._engine.transaction(
                "remove ended jobs", remove_jobs, before_us, key, batch
            )
            jobs, events, payload = (
                jobs + done.jobs,
                events + done.events,
                payload + done.payload_bytes,
            )
            faults += done.faults
            key = done.last or key
            if done.examined < batch:
                break
        blobs, size = await self._blobs(before_us, remove=True)
        return RetentionResult(jobs, events, blobs, size, payload, after=key, faults=tuple(faults))

    async def _blobs(self, before_us: int, *, remove: bool) -> tuple[int, int]:
        """``(blobs, bytes)`` of the raw blobs nothing staying names, found on a reader a
        page at a time; with ``remove``, each removed in transactions of
        :data:`CHUNKS_PER_TX` chunks (and only those removed counted)."""
        count = size = 0
        after: tuple[int, bytes] | None = None
        while True:
            page, nxt = await self._engine.read(blob_candidates, before_us, after, BLOBS_PER_READ)
            for blob in page:
                gone: bool | None = True
                while remove and (gone := await self._remove_blob(blob, before_us)) is False:
                    pass
                if gone:
                    count, size = count + 1, size + blob.size
            if nxt is None:
                return count, size
            after = nxt

    async def _remove_blob(self, blob: BlobCandidate, before_us: int) -> bool | None:
        """One transaction of :func:`remove_blob`."""
        return await self._engine.transaction(
            "remove raw bytes", remove_blob, blob, before_us, CHUNKS_PER_TX
        )
