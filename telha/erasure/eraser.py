"""The Eraser actor (docs/operations.md, "Erasure"): GDPR erasure of a source, as a job of
its own kind.

``POST /v1/sources/{sourceId}/erase`` calls :meth:`Eraser.erase`: it enqueues an ``erase``
job (with its audit row) and waits for it. The actor leases ``erase`` jobs from the
:class:`~telha.queue.job_queue.JobQueue` (no format worker can: ``erase`` is no format) and
runs their steps (:data:`telha.domain.erasure.STEPS`) in order, one transaction each, each
recorded as an ``erase_step`` event. A process killed mid-erasure leaves the job leased; once
the lease expires the reaper returns it to pending, an Eraser (after the restart, or of
another replica) leases it again and runs the steps not yet recorded.
"""

from __future__ import annotations

import uuid
from typing import Protocol

import anyio
import anyio.abc
import msgspec
import structlog

from telha.domain.erasure import ERASE_FORMAT, ERASE_KIND, STEPS, ErasePayload, preview_body
from telha.domain.errors import NotFound, StaleLease, StorageError, TelhaError
from telha.domain.ids import id_str, new_id, now_us
from telha.domain.model import JobRecord, LeaseRef, NewJob, Scope
from telha.domain.row_faults import RowFault
from telha.logs import bound_job, fields_of
from telha.queue.job_queue import JobQueue
from telha.row_faults import settle
from telha.storage.protocol import ErasureStore, ReadStore, RowFaultStore

__all__ = ["Eraser", "EraserStore"]

log = structlog.get_logger("telha.erasure")

#: How often a waiting request looks at its erase job when no in-process wake-up came (the
#: job may run on another replica), seconds.
_POLL_S = 0.5


class EraserStore(RowFaultStore, Protocol):
    """The storage roles the Eraser uses: reads to resolve what a request names, and the
    erasure's own operations."""

    @property
    def reads(self) -> ReadStore:
        """The read aggregate: a source's versions, whether the scope knows it."""

    @property
    def erasure(self) -> ErasureStore:
        """The erasure aggregate: the erase job, its steps, its preview."""


class Eraser:
    """Runs erase jobs, one at a time.

    :param store: the storage engine (the steps are its transactions).
    :param queue: where erase jobs are leased, heartbeated and, on a storage failure, retried.
    :param pause_after: a failpoint for crash tests: after this step the actor stops working
        (the job stays leased) until cancelled. ``None`` in production.
    """

    def __init__(
        self, store: EraserStore, queue: JobQueue, *, pause_after: str | None = None
    ) -> None:
        self._store = store
        self._queue = queue
        self._pause_after = pause_after
        self._finished: dict[bytes, anyio.Event] = {}

    async def erase(
        self, scope: Scope, source_id: bytes, version_tx: int | None, reason: str, principal: str
    ) -> bytes:
        """Erase a source (``version_tx=None``: every version) or one version, and return the
        result (the JSON of :func:`telha.domain.erasure.result_body`). A version erased
        already answers the result of the erasure that erased it (idempotent).

        :raises NotFound: no such source (or version) in ``scope``.
        :raises StorageError: the erase job ended dead (its events say why).
        """
        versions = await self._store.reads.versions(scope, source_id)
        if version_tx is not None:
            versions = [v for v in versions if v.tx == version_tx]
        if version_tx is not None and not versions:
            raise NotFound("no such source version")
        if not versions and not await self._store.reads.has_source(scope, source_id):
            raise NotFound("no such source")
        if versions and all(v.erasure_id is not None for v in versions):
            earlier = max(versions, key=lambda v: v.tx).erasure_id
            assert earlier is not None
            done = await self._queue.get(scope, earlier, events=False)
            if done is not None and done.state == "completed" and done.stats:
                return done.stats
            return await self._wait(scope, earlier)
        payload = ErasePayload(
            source_id=str(uuid.UUID(bytes=source_id)),
            version_tx=version_tx,
            reason=reason,
            principal=principal,
        )
        job = NewJob(
            new_id(), ERASE_KIND, ERASE_FORMAT, source_id, None, msgspec.json.encode(payload)
        )
        self._finished[job.job_id] = anyio.Event()
        try:
            await self._store.erasure.enqueue(scope, job, payload, now_us=now_us())
            self._queue.transition(ERASE_KIND, "enqueued")
            self._queue.notify(ERASE_FORMAT)
            log.info("erasure_requested", erasure_id=id_str(job.job_id), principal=principal)
            return await self._wait(scope, job.job_id)
        finally:
            self._finished.pop(job.job_id, None)

    async def preview(self, scope: Scope, source_id: bytes, version_tx: int | None) -> bytes:
        """What :meth:`erase` would erase now, erasing nothing: the JSON of
        :func:`telha.domain.erasure.preview_body` (sources with names, versions, node counts).

        :raises NotFound: no such source (or version) in ``scope``.
        """
        versions = await self._store.reads.versions(scope, source_id)
        if version_tx is not None and not any(v.tx == version_tx for v in versions):
            raise NotFound("no such source version")
        if not versions and not await self._store.reads.has_source(scope, source_id):
            raise NotFound("no such source")
        found = await self._store.erasure.preview(scope, source_id, version_tx)
        return msgspec.json.encode(preview_body(source_id, version_tx, found))

    async def _wait(self, scope: Scope, job_id: bytes) -> bytes:
        while True:
            job = await self._queue.get(scope, job_id, events=False)
            if job is None:
                raise NotFound("no such erasure")
            if job.state == "completed" and job.stats:
                return job.stats
            if job.state == "dead":
                raise StorageError(f"erasure {id_str(job_id)} failed: {job.failure_reason}")
            event = self._finished.get(job_id)
            with anyio.move_on_after(_POLL_S):
                await (event.wait() if event is not None else anyio.sleep_forever())

    async def run(self, *, task_status: anyio.abc.TaskStatus[Eraser]) -> None:
        """Actor body: lease the next erase job, run its steps, repeat until cancelled. A
        step the store failed is retried (``transient``); an erase job whose stored rows
        cannot be processed ends ``dead`` (``corrupt_row: step …``) and the next job goes on
        (docs/architecture.md, "Supervision and bad rows")."""
        task_status.started(self)
        while True:
            job = await self._queue.lease([ERASE_FORMAT], scope=None, worker_id="core:eraser")
            with bound_job(**fields_of(job)):
                await self._run_job(job)

    async def _run_job(self, job: JobRecord) -> None:
        lease = LeaseRef(job.job_id, job.lease_generation)
        try:
            for step in STEPS:
                extended, _ = await self._queue.heartbeat([lease])
                if not extended:
                    raise StaleLease("the erase job's lease was lost")
                counts = await self._store.erasure.step(lease, step, now_us=now_us())
                log.info("erase_step", step=step, **counts)
                if step == self._pause_after:
                    log.warning("erase_paused", step=step)
                    await anyio.sleep_forever()
        except StaleLease as exc:
            log.warning("erase_lease_lost", error=exc.message)
            return
        except RowFault as fault:  # a stored row the erasure cannot process: dead, not retried
            await settle(self._store, fault, self._queue.metrics, "eraser")
            self._queue.transition(ERASE_KIND, "dead")
            log.error("erasure_failed", reason=fault.reason)
            self._wake(job.job_id)
            return
        except TelhaError as exc:
            try:
                await self._queue.fail(lease, "transient", exc.message)
            except TelhaError as failed:  # lease lost or store down: expiry is the backstop
                log.warning("erasure_retry_not_recorded", job_id=id_str(lease.job_id),
                            error=failed.message)  # fmt: skip
            return
        except BaseException:
            # Shutdown: hand the job back at once (the next Eraser resumes it), not after
            # the lease runs out.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._queue.release(lease, "released at shutdown")
            raise
        self._queue.transition(ERASE_KIND, "completed")
        log.info("erasure_completed")
        self._wake(job.job_id)

    def _wake(self, job_id: bytes) -> None:
        """Wake the request waiting for the erase job ``job_id`` here, if any."""
        event = self._finished.get(job_id)
        if event is not None:
            event.set()
