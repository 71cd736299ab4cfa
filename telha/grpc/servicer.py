"""``WorkerService`` (docs/worker-protocol.md): PollJobs, SubmitIngestionResult, Heartbeat
over the same :class:`~telha.queue.job_queue.JobQueue` and
:class:`~telha.ingest.ingestor.Ingestor` the in-process pools use. The caller's identity
comes from :data:`current_auth`, set by the gRPC front's auth hook (or by the in-process
transport).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextvars import ContextVar

import anyio
import structlog
from grpclib import GRPCError, Status

from telha.domain.errors import NotFound, OutOfSync, StaleLease, TelhaError
from telha.domain.ids import id_str
from telha.domain.model import JobRecord, LeaseRef, Scope
from telha.domain.policy import parse_reason
from telha.domain.sync_runs import SYNC_FORMATS, is_sync_kind
from telha.ingest.ingestor import Ingestor, content_ref
from telha.ingest.request import KNOWN_FORMATS
from telha.ingest.sync_runs import SyncRuns
from telha.logs import bound_job, fields_of
from telha.queue.job_queue import JobQueue, LeaseInterrupt
from telha.storage.protocol import RawStore
from telha.tokens import WorkerAuth
from telha_proto.telha.worker.v1 import (
    CancelJob,
    ContentChunk,
    FetchContentRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    IngestionResult,
    JobPayload,
    PollJobsRequest,
    SubmitResponse,
    WorkerServiceBase,
)

__all__ = ["WorkerServicer", "current_auth"]

log = structlog.get_logger("telha.grpc")

#: The authenticated worker of the current call.
current_auth: ContextVar[WorkerAuth] = ContextVar("telha_worker_auth")


def _job_id(text: str) -> bytes:
    try:
        return uuid.UUID(text).bytes
    except ValueError:
        raise GRPCError(Status.INVALID_ARGUMENT, f"job_id {text!r} is not a UUID") from None


def _auth() -> WorkerAuth:
    try:
        return current_auth.get()
    except LookupError:
        raise GRPCError(Status.UNAUTHENTICATED, "no worker credentials") from None


def _payload(job: JobRecord) -> JobPayload:
    return JobPayload(
        job_id=id_str(job.job_id),
        tenant_id=job.scope.tenant_id,
        organization_id=job.scope.organization_id,
        kind=job.kind,
        payload_json=job.payload,
        lease_deadline=job.lease_deadline or 0,
        attempts=job.attempts,
        lease_generation=job.lease_generation,
    )


class _Stream:
    """One ``PollJobs`` stream: its capacity slots, the jobs it holds (job id → lease
    generation) until each completes, fails, is released, reaped, lost or cancelled, and the
    ``cancel`` messages still to send (at most one per job it held: bounded by capacity)."""

    def __init__(self, worker_id: str, capacity: int) -> None:
        self.worker_id = worker_id
        self.slots = anyio.Semaphore(capacity)
        self.holds: dict[bytes, int] = {}
        self.cancels: dict[bytes, int] = {}
        self.leased = 0
        #: Set when a held job leaves or a cancel is queued (a stream waiting for its last
        #: jobs looks again).
        self.changed = anyio.Event()
        self.interrupt = LeaseInterrupt()
        self.detached = False

    def leased_all(self, max_jobs: int) -> bool:
        return max_jobs > 0 and self.leased >= max_jobs

    async def lease(
        self, queue: JobQueue, formats: list[str], scope: Scope | None
    ) -> JobRecord | None:
        """Take a slot, then the next job; the slot is given back when the job leaves.
        ``None`` (nothing leased) when a cancel is waiting to be sent."""
        await self.slots.acquire()
        try:
            job = await queue.lease_or_interrupt(
                formats, scope=scope, worker_id=self.worker_id, interrupt=self.interrupt
            )
        except BaseException:
            self.slots.release()
            raise
        if job is None:
            self.slots.release()
            return None
        self.holds[job.job_id] = job.lease_generation
        self.leased += 1
        queue.track(job, lambda: self._finished(job.job_id), lambda: self._cancelled(job.job_id))
        return job

    async def wait_changed(self) -> None:
        await self.changed.wait()
        self.changed = anyio.Event()

    def take_cancels(self) -> list[JobPayload]:
        """The ``cancel`` messages to send now (then none until another cancel)."""
        out = [
            JobPayload(
                cancel=CancelJob(
                    job_id=id_str(job_id), lease_generation=gen, reason="cancelled by request"
                )
            )
            for job_id, gen in self.cancels.items()
        ]
        self.cancels.clear()
        self.interrupt.clear()
        return out

    def _cancelled(self, job_id: bytes) -> None:
        gen = self.holds.get(job_id)
        if gen is not None:
            self.cancels[job_id] = gen
            self.interrupt.interrupt()
            self.changed.set()

    def _finished(self, job_id: bytes) -> None:
        self.holds.pop(job_id, None)
        self.slots.release()
        self.changed.set()


class WorkerServicer(WorkerServiceBase):
    """The worker protocol's server side.

    :param queue: leases, heartbeats, failures.
    :param ingestor: applies submissions.
    :param raw: the store's raw upload aggregate, where ``FetchContent`` reads stored raw bytes.
    """

    def __init__(
        self, queue: JobQueue, ingestor: Ingestor, raw: RawStore, sync: SyncRuns | None = None
    ) -> None:
        self._queue = queue
        self._ingestor = ingestor
        self._raw = raw
        #: Ends ``sync:<kind>`` jobs (docs/connectors.md, "Sync runs").
        self._sync = sync
        #: Open ``PollJobs`` streams with failover.
        self._streams: set[_Stream] = set()

    async def poll_jobs(
        self, message: PollJobsRequest, *, failover: bool = True
    ) -> AsyncGenerator[JobPayload, None]:
        """Stream leased jobs of ``message.formats``, never more than ``capacity`` unfinished
        at once on this stream (a slot frees when its job completes, fails or expires). With
        ``max_jobs`` (> 0) the stream leases that many jobs in all and ends once they are
        finished.

        Fast failover (docs/worker-protocol.md): when the stream ends any other way (the
        worker died, the connection reset, the client cancelled it) the jobs it still holds go
        back to ``pending`` at once (:meth:`JobQueue.lost`, event ``worker_lost``), unless
        ``failover=False`` (in-process pools settle their own jobs) or core itself is closing
        the stream (:meth:`detach_streams`).

        Cancel (docs/worker-protocol.md): a held job cancelled through this process (or found
        cancelled by :meth:`JobQueue.check_revoked`) is announced on the stream by a
        ``JobPayload`` whose ``cancel`` is set (no new job); its slot is free again.

        :raises GRPCError: ``INVALID_ARGUMENT`` for no or unknown formats.
        """
        auth = _auth()
        unknown = sorted(set(message.formats) - set(KNOWN_FORMATS) - set(SYNC_FORMATS))
        if not message.formats or unknown:
            raise GRPCError(
                Status.INVALID_ARGUMENT,
                f"formats must be known format names; unknown: {unknown or '(none given)'}",
            )
        stream = _Stream(message.worker_id or "anonymous", max(1, message.capacity))
        if failover:
            self._streams.add(stream)
        try:
            with self._queue.polling(message.formats):
                while True:
                    for cancel in stream.take_cancels():
                        yield cancel
                    if stream.leased_all(message.max_jobs):
                        if not stream.holds and not stream.cancels:
                            break  # max_jobs leased and finished: the stream ends
                        await stream.wait_changed()
                        continue
                    job = await stream.lease(self._queue, message.formats, auth.scope)
                    if job is None:
                        continue  # a cancel to send first
                    # No contextvars here: an async generator runs in its consumer's context.
                    if log.isEnabledFor(logging.DEBUG):
                        log.debug("job_leased", **fields_of(job), worker=stream.worker_id)
                    yield _payload(job)
        finally:
            self._streams.discard(stream)
            if failover and not stream.detached and stream.holds:
                self._queue.lost(
                    [LeaseRef(j, gen) for j, gen in stream.holds.items()],
                    f"worker {stream.worker_id}: its PollJobs stream ended",
                )

    def detach_streams(self) -> None:
        """Core is closing the open ``PollJobs`` streams itself (the gRPC front stopping): their
        end says nothing about their workers, whose jobs keep their leases (a worker finishes
        and submits across a core restart; lease expiry is the backstop)."""
        for stream in self._streams:
            stream.detached = True

    async def _held(self, auth: WorkerAuth, job_id: bytes, generation: int) -> JobRecord:
        """The job, when it is leased under ``generation`` in the caller's scope.

        :raises GRPCError: ``FAILED_PRECONDITION`` otherwise (nothing is written).
        """
        job = self._queue.leased_here(job_id)
        if job is None:  # leased before a restart, or through another replica
            job = await self._queue.get(auth.scope, job_id, events=False)
        if (
            job is not None
            and auth.scope in (None, job.scope)
            and job.state == "leased"
            and job.lease_generation == generation
        ):
            return job
        self._queue.metrics.leases_lost.labels(job.kind if job is not None else "unknown").inc()
        raise GRPCError(
            Status.FAILED_PRECONDITION,
            f"job {id_str(job_id)} is not held under lease generation {generation}",
        )

    async def submit_ingestion_result(self, message: IngestionResult) -> SubmitResponse:
        """A submission (applied atomically with the job's completion) or a typed failure."""
        auth = _auth()
        job_id = _job_id(message.job_id)
        job = await self._held(auth, job_id, message.lease_generation)
        with bound_job(**fields_of(job)):
            return await self._settle(job, message)

    async def _settle(self, job: JobRecord, message: IngestionResult) -> SubmitResponse:
        """Apply a success or record a failure of a held job; observes the lease-to-submit
        time when the job leaves the lease (final submission, failure, invalid)."""
        lease = LeaseRef(job.job_id, message.lease_generation)
        held_s = self._queue.held_seconds(job.job_id)
        try:
            if message.success:
                worker = message.worker_id or job.lease_owner or "worker"
                if self._sync is not None and is_sync_kind(job.kind):
                    result = await self._sync.apply(job, lease, message.result_json, worker)
                else:
                    result = await self._ingestor.apply_submission(
                        job, lease, message.result_json, worker
                    )
                self._observe_settled(job, held_s)
                return SubmitResponse(
                    accepted=result.accepted,
                    node_ids=[id_str(n) for n in result.node_ids] + list(result.wanted),
                    lease_deadline=result.lease_deadline,
                    replay=result.replay,
                )
            kind, detail = parse_reason(message.failure_reason, permanent=message.permanent)
            await self._queue.fail(lease, kind, detail)
            self._observe_settled(job, held_s)
            return SubmitResponse(accepted=True)
        except StaleLease as exc:
            self._queue.metrics.leases_lost.labels(job.kind).inc()
            self._queue.forget(lease)
            raise GRPCError(Status.FAILED_PRECONDITION, exc.message) from None
        except OutOfSync as exc:
            raise GRPCError(Status.ABORTED, exc.message) from None
        except TelhaError as exc:  # storage trouble: the worker retries, the lease protects
            raise GRPCError(Status.UNAVAILABLE, exc.message) from None

    def _observe_settled(self, job: JobRecord, held_s: float | None) -> None:
        if held_s is not None and self._queue.leased_here(job.job_id) is None:
            self._queue.metrics.lease_to_submit.labels(job.kind).observe(held_s)

    async def fetch_content(self, message: FetchContentRequest) -> AsyncIterator[ContentChunk]:
        """The stored raw bytes of a held job (its payload's ``content_ref``), from
        ``message.offset`` on, in chunks of at most 1 MiB.

        :raises GRPCError: ``FAILED_PRECONDITION`` when the caller does not hold the job under
            ``lease_generation``; ``NOT_FOUND`` when the job references no stored content or
            the offset is past its end.
        """
        auth = _auth()
        job = await self._held(auth, _job_id(message.job_id), message.lease_generation)
        digest = content_ref(job.payload)
        if digest is None:
            raise GRPCError(Status.NOT_FOUND, "the job's content is inline in its payload")
        try:
            async for offset, data, total in self._raw.read(job.scope, digest, message.offset):
                yield ContentChunk(offset=offset, data=data, total_size=total)
        except NotFound as exc:
            raise GRPCError(Status.NOT_FOUND, exc.message) from None

    async def heartbeat(self, message: HeartbeatRequest) -> HeartbeatResponse:
        """Extend the leases the caller holds. All or nothing: if any listed job is not held
        under its generation (or is another scope's), ``FAILED_PRECONDITION`` and nothing is
        extended (workers heartbeat each job on its own, so they learn which lease is lost)."""
        auth = _auth()
        if len(message.job_ids) != len(message.lease_generations):
            raise GRPCError(
                Status.INVALID_ARGUMENT, "job_ids and lease_generations differ in length"
            )
        leases = []
        for text, gen in zip(message.job_ids, message.lease_generations, strict=True):
            job = await self._held(auth, _job_id(text), gen)
            leases.append(LeaseRef(job.job_id, gen))
        extended, deadline = await self._queue.heartbeat(leases)
        if len(extended) != len(leases):  # lost between the check and the write
            self._queue.metrics.leases_lost.labels("unknown").inc()
            for lease in leases:
                if lease.job_id not in extended:
                    self._queue.forget(lease)
            raise GRPCError(Status.FAILED_PRECONDITION, "a listed lease is no longer held")
        return HeartbeatResponse(
            extended_job_ids=[id_str(j) for j in extended], lease_deadline=deadline
        )
