"""A scripted worker for tests: the real gRPC client (grpclib + generated stubs) over
loopback, driven step by step so tests can submit exactly what they need.

Each :meth:`ScriptedWorker.next_job` opens a ``PollJobs`` stream that leases one job
(``max_jobs=1``) and stays open until that job is finished (core then ends it), as a worker
holding the job would: closing a stream that holds a job hands the job back (fast failover,
``worker_lost``). A ``cancel`` message core sends on a stream (the job was cancelled) is kept
for :meth:`ScriptedWorker.cancel_message`. Leaving :func:`scripted_worker` closes every
stream still open."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream
from grpclib.client import Channel

from telha_proto.telha.worker.v1 import (
    CancelJob,
    FetchContentRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    IngestionResult,
    JobPayload,
    PollJobsRequest,
    SubmitResponse,
    WorkerServiceStub,
)

__all__ = ["ScriptedWorker", "scripted_worker"]


class ScriptedWorker:
    """One channel, one stub; ``next_job`` leases through a real PollJobs stream."""

    def __init__(self, stub: WorkerServiceStub, worker_id: str, tg: anyio.abc.TaskGroup) -> None:
        self.stub = stub
        self.worker_id = worker_id
        self._tg = tg
        self._streams: set[anyio.CancelScope] = set()
        #: job id → the ``cancel`` message core sent for it.
        self.cancels: dict[str, CancelJob] = {}
        self._cancel_seen = anyio.Event()

    async def next_job(self, formats: list[str], within_s: float = 10.0) -> JobPayload:
        """Lease one job through a new PollJobs stream (kept open while the job is held).

        :raises TimeoutError: no job within ``within_s`` (the stream is closed).
        :raises GRPCError: the stream was refused (credentials, formats).
        """
        request = PollJobsRequest(worker_id=self.worker_id, formats=formats, capacity=1, max_jobs=1)
        send, receive = anyio.create_memory_object_stream[JobPayload | Exception](1)
        scope = anyio.CancelScope()
        self._tg.start_soon(self._hold, request, send, scope)
        with receive:
            try:
                with anyio.fail_after(within_s):
                    got = await receive.receive()
            except BaseException:
                scope.cancel()
                raise
        if isinstance(got, Exception):
            raise got
        return got

    async def cancel_message(self, job: JobPayload, within_s: float = 10.0) -> CancelJob:
        """The ``cancel`` message core sent on ``job``'s stream.

        :raises TimeoutError: none within ``within_s``.
        """
        with anyio.fail_after(within_s):
            while job.job_id not in self.cancels:
                await self._cancel_seen.wait()
                self._cancel_seen = anyio.Event()
        return self.cancels[job.job_id]

    def go_away(self) -> None:
        """Close every stream this worker has open, as a worker that stops does (its held
        jobs are handed back)."""
        for scope in self._streams:
            scope.cancel()

    async def _hold(
        self,
        request: PollJobsRequest,
        send: MemoryObjectSendStream[JobPayload | Exception],
        scope: anyio.CancelScope,
    ) -> None:
        """Read one stream until core ends it; its job (or error) goes to ``send``."""
        self._streams.add(scope)
        with scope, send:
            try:
                async for job in self.stub.poll_jobs(request):
                    if job.cancel is not None:
                        self.cancels[job.cancel.job_id] = job.cancel
                        self._cancel_seen.set()
                        continue
                    with suppress(anyio.BrokenResourceError):
                        send.send_nowait(job)
            except Exception as exc:
                with suppress(anyio.BrokenResourceError, anyio.WouldBlock):
                    send.send_nowait(exc)
            finally:
                self._streams.discard(scope)

    async def submit(
        self, job: JobPayload, submission: dict[str, Any] | bytes, *, generation: int | None = None
    ) -> SubmitResponse:
        body = submission if isinstance(submission, bytes) else json.dumps(submission).encode()
        return await self.stub.submit_ingestion_result(
            IngestionResult(
                job_id=job.job_id,
                success=True,
                result_json=body,
                lease_generation=job.lease_generation if generation is None else generation,
                worker_id=self.worker_id,
            )
        )

    async def fail(
        self, job: JobPayload, reason: str, *, permanent: bool = False
    ) -> SubmitResponse:
        return await self.stub.submit_ingestion_result(
            IngestionResult(
                job_id=job.job_id,
                success=False,
                failure_reason=reason,
                permanent=permanent,
                lease_generation=job.lease_generation,
                worker_id=self.worker_id,
            )
        )

    async def fetch(
        self, job: JobPayload, offset: int = 0, *, generation: int | None = None
    ) -> list[tuple[int, bytes, int]]:
        """``FetchContent`` of a held job: ``(offset, data, total size)`` per chunk."""
        request = FetchContentRequest(
            job_id=job.job_id,
            lease_generation=job.lease_generation if generation is None else generation,
            worker_id=self.worker_id,
            offset=offset,
        )
        return [(c.offset, c.data, c.total_size) async for c in self.stub.fetch_content(request)]

    async def heartbeat(self, *jobs: JobPayload) -> HeartbeatResponse:
        return await self.stub.heartbeat(
            HeartbeatRequest(
                worker_id=self.worker_id,
                job_ids=[j.job_id for j in jobs],
                lease_generations=[j.lease_generation for j in jobs],
            )
        )


@asynccontextmanager
async def scripted_worker(
    grpc_addr: str, token: str | None, worker_id: str = "scripted"
) -> AsyncIterator[ScriptedWorker]:
    host, _, port = grpc_addr.rpartition(":")
    channel = Channel(host, int(port))
    metadata = {"authorization": f"Bearer {token}"} if token else {}
    try:
        async with anyio.create_task_group() as tg:
            yield ScriptedWorker(WorkerServiceStub(channel, metadata=metadata), worker_id, tg)
            tg.cancel_scope.cancel()  # close the streams still open
    finally:
        channel.close()
