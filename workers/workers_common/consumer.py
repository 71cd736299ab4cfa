"""``WorkerConsumer`` (docs/worker-protocol.md): poll, dispatch, heartbeat, submit.

A handler is ``handle(job) -> dict | bytes`` (single shot) or a generator yielding submission
dicts (``ids = yield builder.build()``): the consumer assigns ``seq``, defaults each yielded
dict to ``partial: True`` unless it sets ``partial: False`` (which finalizes), sends back the
node ids core assigned, and submits an empty finalizer if the generator ends without one.
Plain and generator handlers run in a worker thread, never on the event loop; an ``async def``
handler (I/O-bound: ``web_worker`` driving a browser) is awaited on the event loop and must
keep its CPU-bound work off it (its result is encoded in a thread). A worker module may also
expose ``lifespan()``, an async context manager entered once around all its consumers
(:func:`module_lifespan`): process-wide resources such as a browser. A module that sets
``PROCESS_POOL = True`` (a plain, pure-Python, CPU-bound handler: ``email_worker``,
``code_worker``) runs in a worker process of anyio's process pool when the consumer is given
a ``processes`` limiter, so its parsing holds no GIL of the process that hosts the consumer
(``telha serve``); a lost lease kills that process. One heartbeat task per stream
extends every in-flight lease each ``heartbeat_interval_s``; a job whose lease was not
extended is abandoned (its result is never submitted).

A job whose payload references stored content (``content_ref``: a large upload) is fetched
with ``FetchContent`` into a spool file before the handler runs (``Job.raw_path``), checked
against its BLAKE3, and removed when the job is done.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import inspect
import json
import logging
import os
import tempfile
import time
import types
import uuid
from collections.abc import Callable, Generator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, Protocol

import anyio
import anyio.abc
import anyio.to_process
import blake3
import msgspec
from grpclib import GRPCError, Status
from grpclib.exceptions import StreamTerminatedError

from telha_proto.telha.worker.v1 import (
    FetchContentRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    IngestionResult,
    JobPayload,
    PollJobsRequest,
    SubmitResponse,
)
from workers_common.failures import ResourceLimit, TransientFailure, classify
from workers_common.job import Job
from workers_common.logs import bound_job, payload_fields
from workers_common.metrics import WorkerMetrics

__all__ = [
    "HEARTBEAT_INTERVAL_SECS",
    "Job",
    "Transport",
    "WorkerConsumer",
    "module_lifespan",
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


_DONE = object()

#: What handler code may raise and still be only its job's failure: ``SystemExit`` (a library
#: calling ``sys.exit``) and ``KeyboardInterrupt`` too, which asyncio would otherwise let out
#: of the task and stop the whole process (``telha serve`` with it). Other
#: ``BaseException``\ s still end the consumer (cancellation, a deliberate consumer death).
_HANDLER_ERRORS = (Exception, SystemExit, KeyboardInterrupt)


def _advance(gen: Generator[Any, Any, Any], ids: list[str] | None) -> Any:
    """Next submission of a generator handler (``send(ids)`` after the first), or ``_DONE``.
    StopIteration cannot cross a thread/future boundary, hence the sentinel."""
    try:
        return next(gen) if ids is None else gen.send(ids)
    except StopIteration:
        return _DONE


#: How long closing a generator waits for a step still running in an abandoned thread.
_CLOSE_WAIT_S = 2.0


def _close_generator(gen: Generator[Any, Any, Any]) -> None:
    """Close ``gen``; if a step of it still runs in a thread a cancelled job left behind,
    retry for up to :data:`_CLOSE_WAIT_S`, then leave it to finish on its own."""
    deadline = time.monotonic() + _CLOSE_WAIT_S
    while True:
        try:
            gen.close()
            return
        except ValueError:  # "generator already executing"
            if time.monotonic() > deadline:
                log.warning("a handler step is still running; its generator is left open")
                return
            time.sleep(0.05)
        except _HANDLER_ERRORS as exc:  # a handler's cleanup failing must not fail the job again
            log.warning("closing the handler's generator raised: %r", exc)
            return


def module_lifespan(module: ModuleType) -> AbstractAsyncContextManager[Any]:
    """The worker module's ``lifespan()`` context (entered once around its consumers, in the
    task that starts them), or a no-op when it has none."""
    factory = getattr(module, "lifespan", None)
    if factory is None:
        return contextlib.nullcontext()
    cm: AbstractAsyncContextManager[Any] = factory()
    return cm


class _HandlerFailed(Exception):
    """Handler code raised; the cause is the handler's exception (classified for the wire)."""


@dataclass
class _InFlight:
    generation: int
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    #: For ``WorkerMetrics``: submitted, failed or not_accepted (abandoned is seen from scope).
    outcome: str = "submitted"


def _job(payload: JobPayload) -> tuple[Job, str | None]:
    """The handler's view of a payload, and the ``content_ref`` to fetch (``None``: inline)."""
    body = json.loads(payload.payload_json)
    ref = body.get("content_ref")
    job = Job(
        job_id=payload.job_id,
        kind=payload.kind,
        format=body["format"],
        name=body["name"],
        raw=None if ref else base64.b64decode(body.get("content_b64") or ""),
        content_hash=body.get("content_hash"),
        options=body.get("options") or {},
        attempts=payload.attempts,
        tenant_id=payload.tenant_id,
        organization_id=payload.organization_id,
        root_node_id=body.get("root_node_id"),
    )
    return job, ref


def _handle(handler: Callable[[Job], Any], job: Job) -> Any:
    """Run the handler; encode a single-shot result (generators are driven part by part by
    the consumer)."""
    result = handler(job)
    return result if isinstance(result, types.GeneratorType) else _encode(result)


def _handle_in_child(handler: Callable[[Job], Any], job: Job) -> bytes:
    """The process-pool side of a ``PROCESS_POOL`` module: run the handler and encode its
    submission there, so only bytes cross the pipe back.

    :raises TypeError: the handler returned a generator (streaming handlers cannot run in
        a process pool: they stay in threads).
    """
    result = handler(job)
    if isinstance(result, types.GeneratorType):
        result.close()
        raise TypeError(f"{handler.__module__}.handle returned a generator (PROCESS_POOL)")
    return _encode(result)


def _encode(submission: dict[str, Any] | bytes) -> bytes:
    if isinstance(submission, bytes | bytearray):
        return bytes(submission)
    # msgspec: compact UTF-8 JSON in insertion order, ~5x faster than json.dumps on 10k rows.
    return msgspec.json.encode(submission)


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
    ) -> None:
        self._transport = transport
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
        self._received = 0

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
                except _HandlerFailed as failed:
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

    async def _submit_failure(self, payload: JobPayload, failed: _HandlerFailed) -> None:
        assert failed.__cause__ is not None
        reason, permanent, kind = classify(failed.__cause__)
        # The reason goes to core (the job's failureReason), not to the log: a handler's
        # message may quote the content it choked on.
        log.info("job %s failed: %s (%s)", payload.job_id, kind, type(failed.__cause__).__name__)
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
        return await self._transport.submit(
            IngestionResult(
                job_id=payload.job_id,
                success=True,
                result_json=body,
                lease_generation=payload.lease_generation,
                worker_id=self._worker_id,
            )
        )

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run handler code in a worker thread; its exceptions become :class:`_HandlerFailed`."""
        try:
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        except _HANDLER_ERRORS as exc:
            raise _HandlerFailed() from exc

    async def _call_in_process(self, job: Job, processes: anyio.CapacityLimiter) -> bytes:
        """Run the handler in a pool process (cancelling kills that process); its exceptions
        become :class:`_HandlerFailed`, a process that died a ``resource_limit``."""
        try:
            encoded: bytes = await anyio.to_process.run_sync(
                _handle_in_child, self._handler, job, cancellable=True, limiter=processes
            )
        except anyio.BrokenWorkerProcess as exc:
            died = ResourceLimit(f"the handler's worker process died: {exc}")
            raise _HandlerFailed() from died
        except _HANDLER_ERRORS as exc:
            raise _HandlerFailed() from exc
        return encoded

    async def _call_async(self, job: Job) -> bytes:
        """Await an ``async def`` handler on the event loop, then encode its result in a
        thread; its exceptions become :class:`_HandlerFailed`."""
        try:
            result = await self._handler(job)
        except _HANDLER_ERRORS as exc:
            raise _HandlerFailed() from exc
        encoded: bytes = await self._call(_encode, result)
        return encoded

    async def _run_handler(self, payload: JobPayload) -> None:
        # The handler and result encoding run in worker threads (or processes), and so does
        # decoding a large payload: none may hold the event loop (a payload or result can be
        # megabytes of JSON). A small payload is decoded here: cheaper than the hand-off.
        if len(payload.payload_json) <= _INLINE_PAYLOAD_BYTES:
            try:
                job, ref = _job(payload)
            except _HANDLER_ERRORS as exc:
                raise _HandlerFailed() from exc
        else:
            job, ref = await self._call(_job, payload)
        spool: Path | None = None
        try:
            if ref is not None:
                spool = await self._fetch(payload, ref)
                job = dataclasses.replace(job, raw_path=spool)
            if inspect.iscoroutinefunction(self._handler):
                await self._submit(payload, await self._call_async(job))
                return
            if self._processes is not None:
                await self._submit(payload, await self._call_in_process(job, self._processes))
                return
            result = await self._call(_handle, self._handler, job)
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

        :raises _HandlerFailed: the bytes do not match (transient: core is asked again on
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
                                raise _HandlerFailed() from TransientFailure(
                                    f"content stream skipped from byte {offset} to {chunk.offset}"
                                )
                            await anyio.to_thread.run_sync(_spool_write, out, hasher, chunk.data)
                            offset += len(chunk.data)
                        break
                    except GRPCError as exc:
                        if exc.status is Status.NOT_FOUND:
                            raise _HandlerFailed() from TransientFailure(
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
                raise _HandlerFailed() from TransientFailure(
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
                await anyio.to_thread.run_sync(_close_generator, gen)

    async def _drive(self, payload: JobPayload, gen: Generator[Any, Any, Any]) -> None:
        seq = 0
        ids: list[str] | None = None
        while True:
            item = await self._call(_advance, gen, ids)
            if item is _DONE:
                final = {"v": 1, "canonicalText": "", "seq": seq, "partial": False}
                await self._submit(payload, _encode(final))
                return
            submission = dict(item)
            submission["seq"] = seq
            partial = submission.setdefault("partial", True)
            try:
                body = await anyio.to_thread.run_sync(_encode, submission)
                # A 10,000-row partial is tens of MB of dicts: not kept alive while core
                # applies it (its JSON is what is sent, and resent).
                del item, submission
                resp = await self._submit(payload, body)
            except GRPCError as exc:
                if exc.status is Status.ABORTED:  # out of sequence: fail now, core retries
                    raise _HandlerFailed() from exc
                raise
            del body
            if not partial or not resp.accepted:
                return  # finished, or refused (invalid): the job is settled in core
            ids = list(resp.node_ids)
            seq += 1
