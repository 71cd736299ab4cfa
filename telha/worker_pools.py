"""In-process worker pools (DESIGN.md §1, §7): the ``[workers] in_process`` modules run inside
``telha serve``, ``concurrency`` consumers each, through an in-process transport that calls the
same :class:`~telha.grpc.servicer.WorkerServicer` the gRPC front serves. Handlers run in
worker threads (the consumer's doing), never on the event loop, or — for modules that set
``PROCESS_POOL`` — in a shared pool of ``[workers] processes`` worker processes; ``async def``
handlers are awaited on it. A module's ``lifespan()`` (if any) is entered around its consumers.

On shutdown every job still held by a pool is released: back to ``pending`` at once, the
attempt not counted.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import AsyncIterator
from types import ModuleType

import anyio
import anyio.abc
import structlog

from telha.grpc.servicer import WorkerServicer, current_auth
from telha.grpc.tokens import WorkerAuth
from telha.ids import id_str
from telha.logs import fields_of
from telha.model import LeaseRef
from telha.queue.job_queue import JobQueue
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
from workers_common.consumer import HEARTBEAT_INTERVAL_SECS, WorkerConsumer, module_lifespan

__all__ = ["InProcessTransport", "WorkerPools", "load_worker_modules"]

log = structlog.get_logger("telha.workers")

_FLEET = WorkerAuth(None, "in-process")


class InProcessTransport:
    """The worker protocol without the network: same servicer, fleet identity."""

    def __init__(self, servicer: WorkerServicer) -> None:
        self._servicer = servicer

    async def poll_jobs(self, request: PollJobsRequest) -> AsyncIterator[JobPayload]:
        """Leased jobs, as ``PollJobs`` streams them."""
        current_auth.set(_FLEET)
        async for payload in self._servicer.poll_jobs(request):
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

    async def run(self, *, task_status: anyio.abc.TaskStatus[list[str]]) -> None:
        """Actor body; reports the started consumers' worker ids. A restart after a crash
        builds a fresh set of consumers (never more than ``concurrency`` per module)."""
        self._consumers = []
        for name, module in self._modules.items():
            for i in range(self._concurrency):
                self._consumers.append(
                    WorkerConsumer(
                        self._transport,
                        module.handle,
                        list(module.FORMATS),
                        worker_id=f"in-process:{name}:{i}",
                        capacity=1,
                        heartbeat_interval_s=self._interval,
                        processes=(
                            self._processes if getattr(module, "PROCESS_POOL", False) else None
                        ),
                    )
                )
        try:
            async with contextlib.AsyncExitStack() as stack:
                # Each module's lifespan (a browser, …) wraps its consumers: entered before
                # they start, left after they stopped.
                for module in self._modules.values():
                    await stack.enter_async_context(module_lifespan(module))
                async with anyio.create_task_group() as tg:
                    for consumer in self._consumers:
                        await tg.start(consumer.run)
                    task_status.started([c.worker_id for c in self._consumers])
        finally:
            with anyio.CancelScope(shield=True):
                await self._release_all()

    async def _release_all(self) -> None:
        for consumer in self._consumers:
            for job_id, generation in consumer.in_flight():
                lease = LeaseRef(job_id, generation)
                held = self._queue.leased_here(job_id)
                if await self._queue.release(lease, "released at shutdown"):
                    fields = fields_of(held) if held is not None else {"job_id": id_str(job_id)}
                    log.info("job_released", **fields, worker=consumer.worker_id)
