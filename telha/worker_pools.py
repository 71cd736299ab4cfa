"""In-process worker pools (docs/architecture.md): the ``[workers] in_process`` modules run inside
``telha serve``, ``concurrency`` consumers each, through an in-process transport that calls the
same :class:`~telha.grpc.servicer.WorkerServicer` the gRPC front serves. Handlers run in
worker threads (the consumer's doing), never on the event loop, or — for modules that set
``PROCESS_POOL`` — in a shared pool of ``[workers] processes`` worker processes (an input
under the module's ``PROCESS_POOL_MIN_BYTES``, if it sets one, in a thread); ``async def``
handlers are awaited on it. A module's ``lifespan()`` (if any) is entered around its consumers.

On shutdown every job still held by a pool is released: back to ``pending`` at once, the
attempt not counted. A consumer task that dies (anything but a cancellation escapes it: a
poll stream that broke, a ``BaseException`` out of an ``async def`` handler) loses its jobs
like a remote worker whose stream ended (``worker_lost``) and is restarted alone,
after a backoff, while the module's other consumers go on.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import AsyncIterator
from types import ModuleType

import anyio
import anyio.abc
import structlog

from telha.domain.ids import id_str
from telha.domain.model import LeaseRef
from telha.grpc.servicer import WorkerServicer, current_auth
from telha.logs import fields_of
from telha.queue.job_queue import JobQueue
from telha.tokens import WorkerAuth
from telha_proto.telha.worker.v1 import (
    ContentChunk,
    FetchContentRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    IngestionResult,
    JobPayload,
    PollJobsRequest,
    SubmitResponse,
)
from workers_common.consumer import HEARTBEAT_INTERVAL_SECS, WorkerConsumer
from workers_common.handlers import module_lifespan
from workers_common.projection import module_spec

__all__ = ["InProcessTransport", "WorkerPools", "load_worker_modules"]

log = structlog.get_logger("telha.workers")

_FLEET = WorkerAuth(None, "in-process")

#: A dead consumer is restarted after this many seconds, doubling per death up to the cap
#: (back to the first delay once a consumer lived ``_STABLE_S`` seconds).
_RESTART_FIRST_S = 0.2
_RESTART_MAX_S = 10.0
_STABLE_S = 60.0


def _is_shutdown(exc: BaseException) -> bool:
    """Whether ``exc`` (or any exception in a group) is a cancellation or an interrupt,
    which end a consumer on purpose, not a death."""
    stop = (anyio.get_cancelled_exc_class(), KeyboardInterrupt)
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(lambda e: isinstance(e, stop)) is not None
    return isinstance(exc, stop)


class InProcessTransport:
    """The worker protocol without the network: same servicer, fleet identity."""

    def __init__(self, servicer: WorkerServicer) -> None:
        self._servicer = servicer

    async def poll_jobs(self, request: PollJobsRequest) -> AsyncIterator[JobPayload]:
        """Leased jobs, as ``PollJobs`` streams them."""
        current_auth.set(_FLEET)
        # No failover on the stream's end: the pool settles its consumers' jobs itself.
        stream = self._servicer.poll_jobs(request, failover=False)
        async with contextlib.aclosing(stream):
            async for payload in stream:
                yield payload

    async def submit(self, result: IngestionResult) -> SubmitResponse:
        """``SubmitIngestionResult``."""
        current_auth.set(_FLEET)
        return await self._servicer.submit_ingestion_result(result)

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        """``Heartbeat``."""
        current_auth.set(_FLEET)
        return await self._servicer.heartbeat(request)

    async def fetch_content(self, request: FetchContentRequest) -> AsyncIterator[ContentChunk]:
        """``FetchContent``: a held job's stored raw bytes, read from the store directly."""
        current_auth.set(_FLEET)
        async for chunk in self._servicer.fetch_content(request):
            yield chunk


def load_worker_modules(names: list[str]) -> dict[str, ModuleType]:
    """Import each worker module; all-or-nothing before any work starts.

    :raises ValueError: a module is missing or lacks ``FORMATS``/``handle``.
    """
    modules = {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ValueError(f"worker module {name!r} cannot be imported: {exc}") from None
        if not callable(getattr(module, "handle", None)) or not getattr(module, "FORMATS", None):
            raise ValueError(f"{name!r} is not a worker module (needs FORMATS and handle)")
        modules[name] = module
    return modules


class WorkerPools:
    """Runs ``concurrency`` consumers per module until cancelled.

    :param processes: worker processes for the modules that set ``PROCESS_POOL`` (shared by
        them all; ``None``: one per CPU; ``0``: those modules run in threads too).

    :param heartbeat_interval_s: kept under a third of the lease so no in-process job loses
        its lease while it is being worked on.
    """

    def __init__(
        self,
        modules: dict[str, ModuleType],
        concurrency: int,
        servicer: WorkerServicer,
        queue: JobQueue,
        lease_secs: float,
        processes: int | None = None,
    ) -> None:
        self._modules = modules
        self._concurrency = concurrency
        self._transport = InProcessTransport(servicer)
        self._queue = queue
        self._interval = min(float(HEARTBEAT_INTERVAL_SECS), lease_secs / 3)
        self._consumers: list[WorkerConsumer] = []
        count = (os.cpu_count() or 2) if processes is None else processes
        self._processes = anyio.CapacityLimiter(count) if count else None

    def _consumer(self, name: str, module: ModuleType, i: int) -> WorkerConsumer:
        return WorkerConsumer(
            self._transport,
            module.handle,
            list(module.FORMATS),
            worker_id=f"in-process:{name}:{i}",
            capacity=1,
            heartbeat_interval_s=self._interval,
            processes=self._processes if getattr(module, "PROCESS_POOL", False) else None,
            process_min_bytes=int(getattr(module, "PROCESS_POOL_MIN_BYTES", 0)),
            log_failures=False,  # core logs each failure (job_failed) in the same log
            projection=module_spec(name, module),
        )

    async def run(self, *, task_status: anyio.abc.TaskStatus[list[str]]) -> None:
        """Actor body; reports the started consumers' worker ids. A restart after a crash
        builds a fresh set of consumers (never more than ``concurrency`` per module)."""
        self._consumers = [
            self._consumer(name, module, i)
            for name, module in self._modules.items()
            for i in range(self._concurrency)
        ]
        try:
            async with contextlib.AsyncExitStack() as stack:
                # Each module's lifespan (a browser, …) wraps its consumers: entered before
                # they start, left after they stopped.
                for module in self._modules.values():
                    await stack.enter_async_context(module_lifespan(module))
                async with anyio.create_task_group() as tg:
                    slot = 0
                    for name, module in self._modules.items():
                        for i in range(self._concurrency):
                            await tg.start(self._keep, slot, name, module, i)
                            slot += 1
                    task_status.started([c.worker_id for c in self._consumers])
        finally:
            with anyio.CancelScope(shield=True):
                await self._release_all()

    async def _keep(
        self,
        slot: int,
        name: str,
        module: ModuleType,
        i: int,
        *,
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        """Run consumer ``slot``; when it dies, lose its jobs (``worker_lost``) and restart a
        fresh one after a backoff. Reports started once the first consumer polls."""
        status: anyio.abc.TaskStatus[None] | None = task_status
        deaths = 0
        while True:
            consumer = self._consumers[slot]
            started = time.monotonic()
            try:
                if status is not None:
                    await consumer.run(task_status=status)
                else:
                    await consumer.run()
                failure: BaseException | None = None
            except BaseException as exc:
                if _is_shutdown(exc):
                    raise
                failure = exc
            status = None
            deaths = 1 if time.monotonic() - started > _STABLE_S else deaths + 1
            await self._lose(consumer, failure)
            await anyio.sleep(min(_RESTART_MAX_S, _RESTART_FIRST_S * 2 ** (deaths - 1)))
            self._consumers[slot] = self._consumer(name, module, i)

    async def _lose(self, consumer: WorkerConsumer, failure: BaseException | None) -> None:
        """A dead consumer's jobs go back to pending (or dead) as lost with their worker."""
        how = type(failure).__name__ if failure is not None else "its poll stream ended"
        log.error("in_process_worker_died", worker=consumer.worker_id, error=how)
        leases = [LeaseRef(job_id, gen) for job_id, gen in consumer.in_flight()]
        try:
            with anyio.CancelScope(shield=True):
                await self._queue.lose(
                    leases, f"in-process worker {consumer.worker_id} died ({how})"
                )
        except Exception:  # storage trouble: their leases expire instead
            log.exception("worker_lost_not_recorded", worker=consumer.worker_id)

    async def _release_all(self) -> None:
        for consumer in self._consumers:
            for job_id, generation in consumer.in_flight():
                lease = LeaseRef(job_id, generation)
                held = self._queue.leased_here(job_id)
                if await self._queue.release(lease, "released at shutdown"):
                    fields = fields_of(held) if held is not None else {"job_id": id_str(job_id)}
                    log.info("job_released", **fields, worker=consumer.worker_id)
