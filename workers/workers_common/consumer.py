"""``WorkerConsumer`` (docs/worker-protocol.md): poll, dispatch, heartbeat, submit.

The consumer runs each job's handler through :mod:`workers_common.handlers` (a thread, a pool
process for a ``PROCESS_POOL`` module, or the event loop for an ``async def`` handler). For a
generator handler it assigns ``seq``, defaults each yielded dict to ``partial: True`` unless
it sets ``partial: False`` (which finalizes), sends back the node ids core assigned, and
submits an empty finalizer if the generator ends without one. A lost lease abandons the job
(and kills its pool process). One heartbeat task per stream extends every in-flight lease each
``heartbeat_interval_s``; a job whose lease was not extended is abandoned (its result is never
submitted). A ``cancel`` message on the poll stream (the job was cancelled in core, its
lease revoked) abandons the job the same way, at once.

A job whose payload references stored content (``content_ref``: a large upload) is fetched
with ``FetchContent`` into a spool file before the handler runs (``Job.raw_path``), checked
against its BLAKE3, and removed when the job is done.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import tempfile
import types
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import anyio
import anyio.abc
import blake3
from grpclib import GRPCError, Status
from grpclib.exceptions import StreamTerminatedError

from telha_proto.telha.worker.v1 import (
    CancelJob,
    FetchContentRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    IngestionResult,
    JobPayload,
    PollJobsRequest,
    SubmitResponse,
)
from workers_common.failures import TransientFailure, classify
from workers_common.handlers import (
    DONE,
    HANDLER_ERRORS,
    HandlerFailed,
    advance,
    call_async,
    call_in_process,
    call_in_thread,
    close_generator,
    decode_job,
    encode,
    handle,
)
from workers_common.job import Job
from workers_common.logs import bound_job, payload_fields
from workers_common.metrics import WorkerMetrics
from workers_common.projection import ProjectionSpec, with_projection

__all__ = [
    "HEARTBEAT_INTERVAL_SECS",
    "Job",
    "Transport",
    "WorkerConsumer",
    "sweep_stale_spools",
]

log = logging.getLogger("workers_common")

#: Resends of a submission whose answer was lost, first after this many seconds, doubling.
_RESENDS = 6  # 0.2 s doubling: about 25 s in all, enough for core to restart
_RESEND_FIRST_S = 0.2
_RESEND_STATUSES = frozenset({Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED})

#: Payloads up to this many bytes of JSON are decoded on the event loop (tens of
#: microseconds); larger ones in a worker thread.
_INLINE_PAYLOAD_BYTES = 64 * 1024

#: Heartbeat period in seconds (docs/worker-protocol.md); core's ``jobs.lease_secs`` must
#: exceed twice this.
HEARTBEAT_INTERVAL_SECS = 60


class Transport(Protocol):
    """The three RPCs of ``WorkerService``, over gRPC or in-process."""

    def poll_jobs(self, request: PollJobsRequest) -> Any:
        """An async iterator of :class:`JobPayload`."""

    async def submit(self, result: IngestionResult) -> SubmitResponse:
        """``SubmitIngestionResult``."""

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        """``Heartbeat``."""

    def fetch_content(self, request: FetchContentRequest) -> Any:
        """An async iterator of :class:`ContentChunk` (``FetchContent``)."""


#: Spool files are named ``telha-fetch-<pid>-<random>``: the pid tells a live worker's file
#: from one a killed worker left behind.
_SPOOL_PREFIX = "telha-fetch-"


def sweep_stale_spools(folder: Path | None) -> int:
    """Remove spool files of worker processes that no longer exist (a SIGKILLed worker cannot
    remove its own); returns how many were removed. ``None`` is the system temp folder."""
    removed = 0
    for path in Path(folder or tempfile.gettempdir()).glob(f"{_SPOOL_PREFIX}*-*"):
        pid_text = path.name[len(_SPOOL_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _spool_write(out: BinaryIO, hasher: Any, data: bytes) -> None:
    hasher.update(data)
    out.write(data)


@dataclass
class _InFlight:
    generation: int
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    #: For ``WorkerMetrics``: submitted, failed or not_accepted (abandoned is seen from scope).
    outcome: str = "submitted"
    #: Core sent a ``cancel`` for the job (its lease was revoked).
    cancelled: bool = False


class WorkerConsumer:
    """Runs one worker module against a transport.

    :param transport: gRPC or in-process.
    :param handler: the module's ``handle(job)``.
    :param formats: the formats to poll for.
    :param worker_id: reported to core (leases, versions).
    :param capacity: jobs in flight at once on this stream.
    :param heartbeat_interval_s: seconds between heartbeats.
    :param drain_s: how long jobs in hand may still run after the stream broke.
    :param spool_dir: where fetched raw bytes are spooled (default: the system temp folder).
    :param metrics: where job outcomes are counted (a worker process's ``/metrics``).
    :param processes: run the (plain, module-level) handler in anyio's process pool, at most
        this limiter's tokens at once across every consumer sharing it; ``None``: threads.
    :param process_min_bytes: with ``processes``, an input held inline and shorter than
        this many bytes runs in a thread all the same (a module's ``PROCESS_POOL_MIN_BYTES``:
        where its parse costs the host less than the pool hand-off; 0: never).
    :param log_failures: log each failed job at info (``False``: at debug, for an in-process
        consumer whose failures core logs in the same log).
    :param projection: the handler's projection spec, sent with each submission
        (:mod:`workers_common.projection`); ``None``: none declared.
    """

    def __init__(
        self,
        transport: Transport,
        handler: Callable[[Job], Any],
        formats: list[str],
        *,
        worker_id: str,
        capacity: int = 1,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_SECS,
        drain_s: float = 60.0,
        spool_dir: Path | None = None,
        metrics: WorkerMetrics | None = None,
        processes: anyio.CapacityLimiter | None = None,
        process_min_bytes: int = 0,
        log_failures: bool = True,
        projection: ProjectionSpec | None = None,
    ) -> None:
        self._transport = transport
        #: Log a failed job at info. An in-process consumer leaves it to core, whose
        #: ``job_failed`` line is in the same log (one line per failure).
        self._failure_level = logging.INFO if log_failures else logging.DEBUG
        self._handler = handler
        self._formats = formats
        self._worker_id = worker_id
        self._capacity = capacity
        self._interval = heartbeat_interval_s
        self._in_flight: dict[str, _InFlight] = {}
        self._idle = anyio.Event()  # set whenever no job is in flight
        self._drain_s = drain_s
        self._spool_dir = spool_dir
        self._metrics = metrics
        self._processes = processes
        self._process_min_bytes = process_min_bytes
        self._received = 0
        self._projection = projection

    @property
    def worker_id(self) -> str:
        """The id this consumer reports to core."""
        return self._worker_id

    @property
    def jobs_received(self) -> int:
        """Jobs its ``PollJobs`` stream delivered so far (a stream that delivered one was
        healthy: the runner's reconnect backoff starts over)."""
        return self._received

    def in_flight(self) -> list[tuple[bytes, int]]:
        """``(job id bytes, lease generation)`` of the jobs this consumer holds now."""
        return [(uuid.UUID(j).bytes, slot.generation) for j, slot in self._in_flight.items()]

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Poll until cancelled or the stream ends; jobs run concurrently up to ``capacity``.

        When the stream breaks (core restarting, network), jobs in hand still finish and
        submit — resends ride out a short outage — for at most ``drain_s`` seconds; then the
        stream's error is raised, for the caller to reconnect. (A restarted core accepts those
        submissions, its leases outlive it; a core that saw the stream end while it kept
        running has handed the jobs to other workers and refuses them.)
        """
        request = PollJobsRequest(
            worker_id=self._worker_id, formats=self._formats, capacity=self._capacity
        )
        lost: Exception | None = None
        removed = await anyio.to_thread.run_sync(sweep_stale_spools, self._spool_dir)
        if removed:
            log.info("removed %d spool file(s) left by workers that are gone", removed)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeats)
            task_status.started()
            try:
                async for payload in self._transport.poll_jobs(request):
                    if payload.cancel is not None:
                        self._cancel(payload.cancel)
                        continue
                    self._received += 1
                    slot = _InFlight(payload.lease_generation)
                    self._in_flight[payload.job_id] = slot
                    self._idle = anyio.Event()
                    tg.start_soon(self._tracked, payload, slot)
            except (GRPCError, OSError, StreamTerminatedError) as exc:
                lost = exc
            if self._in_flight:
                with anyio.move_on_after(self._drain_s):
                    await self._idle.wait()
            tg.cancel_scope.cancel()
        if lost is not None:
            raise lost

    def _cancel(self, cancel: CancelJob) -> None:
        """Core cancelled a job this stream holds: abandon it (its handler is cancelled, a
        ``PROCESS_POOL`` handler's process killed; nothing is submitted). A cancel for a job
        not in flight under that generation (already done) changes nothing."""
        slot = self._in_flight.get(cancel.job_id)
        if slot is None or slot.generation != cancel.lease_generation:
            return
        log.info("job %s was cancelled in core (%s): abandoning it", cancel.job_id, cancel.reason)
        slot.cancelled = True
        slot.scope.cancel()

    async def _heartbeats(self) -> None:
        """Every interval, extend each in-flight lease; a job whose lease core refuses
        (``FAILED_PRECONDITION``) is abandoned, never submitted."""
        while True:
            await anyio.sleep(self._interval)
            for job_id, slot in list(self._in_flight.items()):
                try:
                    await self._transport.heartbeat(
                        HeartbeatRequest(
                            worker_id=self._worker_id,
                            job_ids=[job_id],
                            lease_generations=[slot.generation],
                        )
                    )
                except GRPCError as exc:
                    if exc.status is Status.FAILED_PRECONDITION:
                        log.warning("lease of job %s was not extended: abandoning it", job_id)
                        slot.scope.cancel()
                    else:
                        log.warning("heartbeat failed: %s", exc)
                except Exception as exc:  # core unreachable: try again next beat
                    log.warning("heartbeat failed: %s", exc)

    async def _tracked(self, payload: JobPayload, slot: _InFlight) -> None:
        """:meth:`_process` with the job's fields bound for every log line it causes (here, in
        handler threads, in-process in core) and its outcome counted in ``metrics``."""
        if self._metrics is not None:
            self._metrics.job_started(payload.job_id)
        with bound_job(**payload_fields(payload)):
            try:
                await self._process(payload, slot)
            finally:
                # Still in flight: cancelled from outside (shutdown), its lease left to expire
                # or be released; a cancelled slot scope: the lease was lost.
                lost = slot.scope.cancelled_caught or payload.job_id in self._in_flight
                outcome = "abandoned" if lost else slot.outcome
                if slot.cancelled and slot.scope.cancelled_caught:
                    outcome = "cancelled"
                log.debug("job %s: %s", payload.job_id, outcome)
                if self._metrics is not None:
                    self._metrics.job_finished(payload.job_id, payload.kind, outcome)

    async def _process(self, payload: JobPayload, slot: _InFlight) -> None:
        """Run one job. It leaves the in-flight set when it is done (submitted, failed, refused
        or abandoned); cancelled from outside (shutdown) it stays, so its owner can release
        the lease."""
        done = False
        try:
            with slot.scope:
                try:
                    await self._run_handler(payload)
                except HandlerFailed as failed:
                    slot.outcome = "failed"
                    await self._submit_failure(payload, failed)
            done = True
        except Exception as exc:
            # Core refused or could not be reached: the lease expires and the job is retried.
            log.warning("job %s: submission not accepted: %s", payload.job_id, exc)
            slot.outcome = "not_accepted"
            done = True
        finally:
            if done:
                self._in_flight.pop(payload.job_id, None)
                if not self._in_flight:
                    self._idle.set()

    async def _submit_failure(self, payload: JobPayload, failed: HandlerFailed) -> None:
        assert failed.__cause__ is not None
        reason, permanent, kind = classify(failed.__cause__)
        # The reason goes to core (the job's failureReason), not to the log: a handler's
        # message may quote the content it choked on.
        log.log(
            self._failure_level,
            "job %s failed: %s (%s)",
            payload.job_id,
            kind,
            type(failed.__cause__).__name__,
        )
        await self._transport.submit(
            IngestionResult(
                job_id=payload.job_id,
                success=False,
                failure_reason=reason,
                permanent=permanent,
                lease_generation=payload.lease_generation,
                worker_id=self._worker_id,
            )
        )

    async def _submit(self, payload: JobPayload, body: bytes) -> SubmitResponse:
        """Submit, resending the same body when core could not be reached or did not answer:
        a lost acknowledgement of a partial is answered from the checkpoint (a replay, the same
        node ids); of a final submission, by ``FAILED_PRECONDITION`` (it was applied)."""
        delay = _RESEND_FIRST_S
        for attempt in range(_RESENDS + 1):
            try:
                return await self._submit_once(payload, body)
            except GRPCError as exc:
                if exc.status not in _RESEND_STATUSES or attempt == _RESENDS:
                    raise
                problem: Exception = exc
            except (OSError, StreamTerminatedError) as exc:
                if attempt == _RESENDS:
                    raise
                problem = exc
            log.warning("job %s: submission lost (%s); resending", payload.job_id, problem)
            await anyio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    async def _submit_once(self, payload: JobPayload, body: bytes) -> SubmitResponse:
        if self._projection is not None:  # how the bytes were read (core's identity)
            body = with_projection(body, self._projection)
        return await self._transport.submit(
            IngestionResult(
                job_id=payload.job_id,
                success=True,
                result_json=body,
                lease_generation=payload.lease_generation,
                worker_id=self._worker_id,
            )
        )

    async def _run_handler(self, payload: JobPayload) -> None:
        # The handler and result encoding run in worker threads (or processes), and so does
        # decoding a large payload: none may hold the event loop (a payload or result can be
        # megabytes of JSON). A small payload is decoded here: cheaper than the hand-off.
        if len(payload.payload_json) <= _INLINE_PAYLOAD_BYTES:
            try:
                job, ref = decode_job(payload)
            except HANDLER_ERRORS as exc:
                raise HandlerFailed() from exc
        else:
            job, ref = await call_in_thread(decode_job, payload)
        spool: Path | None = None
        try:
            if ref is not None:
                spool = await self._fetch(payload, ref)
                job = dataclasses.replace(job, raw_path=spool)
            if inspect.iscoroutinefunction(self._handler):
                await self._submit(payload, await call_async(self._handler, job))
                return
            small = job.raw is not None and len(job.raw) < self._process_min_bytes
            if self._processes is not None and not small:
                encoded = await call_in_process(self._handler, job, self._processes)
                await self._submit(payload, encoded)
                return
            result = await call_in_thread(handle, self._handler, job)
            if not isinstance(result, types.GeneratorType):
                await self._submit(payload, result)
                return
            await self._run_generator(payload, result)
        finally:
            if spool is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(spool.unlink, True)

    async def _fetch(self, payload: JobPayload, ref: str) -> Path:
        """Fetch the job's stored raw bytes into a spool file (``FetchContent``), checking
        their BLAKE3 against ``ref``; a broken stream resumes at the last byte received.

        :raises HandlerFailed: the bytes do not match (transient: core is asked again on
            the retry).
        """
        fd, name = await anyio.to_thread.run_sync(
            lambda: tempfile.mkstemp(prefix=f"{_SPOOL_PREFIX}{os.getpid()}-", dir=self._spool_dir)
        )
        path = Path(name)
        hasher = blake3.blake3()
        offset = 0
        try:
            with os.fdopen(fd, "wb") as out:
                delay = _RESEND_FIRST_S
                for attempt in range(_RESENDS + 1):
                    request = FetchContentRequest(
                        job_id=payload.job_id,
                        lease_generation=payload.lease_generation,
                        worker_id=self._worker_id,
                        offset=offset,
                    )
                    try:
                        async for chunk in self._transport.fetch_content(request):
                            if chunk.offset != offset:
                                raise HandlerFailed() from TransientFailure(
                                    f"content stream skipped from byte {offset} to {chunk.offset}"
                                )
                            await anyio.to_thread.run_sync(_spool_write, out, hasher, chunk.data)
                            offset += len(chunk.data)
                        break
                    except GRPCError as exc:
                        if exc.status is Status.NOT_FOUND:
                            raise HandlerFailed() from TransientFailure(
                                f"core has no stored content for this job: {exc.message}"
                            )
                        if exc.status not in _RESEND_STATUSES or attempt == _RESENDS:
                            raise
                    except (OSError, StreamTerminatedError):
                        if attempt == _RESENDS:
                            raise
                    log.warning("job %s: content stream broke at byte %d", payload.job_id, offset)
                    await anyio.sleep(delay)
                    delay *= 2
            if hasher.hexdigest() != ref:
                raise HandlerFailed() from TransientFailure(
                    f"fetched content ({offset} bytes) does not match its content hash"
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(path.unlink, True)
            raise
        return path

    async def _run_generator(self, payload: JobPayload, gen: Generator[Any, Any, Any]) -> None:
        """Drive a generator handler part by part; however that ends (finished, refused,
        failed, abandoned, cancelled) the generator is closed off the event loop, so its
        ``finally`` blocks (open files, a prefetch thread) run."""
        try:
            await self._drive(payload, gen)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(close_generator, gen)

    async def _drive(self, payload: JobPayload, gen: Generator[Any, Any, Any]) -> None:
        seq = 0
        ids: list[str] | None = None
        while True:
            item = await call_in_thread(advance, gen, ids)
            if item is DONE:
                final = {"v": 1, "canonicalText": "", "seq": seq, "partial": False}
                await self._submit(payload, encode(final))
                return
            submission = dict(item)
            submission["seq"] = seq
            partial = submission.setdefault("partial", True)
            try:
                body = await anyio.to_thread.run_sync(encode, submission)
                # A 10,000-row partial is tens of MB of dicts: not kept alive while core
                # applies it (its JSON is what is sent, and resent).
                del item, submission
                resp = await self._submit(payload, body)
            except GRPCError as exc:
                if exc.status is Status.ABORTED:  # out of sequence: fail now, core retries
                    raise HandlerFailed() from exc
                raise
            del body
            if not partial or not resp.accepted:
                return  # finished, or refused (invalid): the job is settled in core
            ids = list(resp.node_ids)
            seq += 1
