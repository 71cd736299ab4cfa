"""A scripted worker for tests: the real gRPC client (grpclib + generated stubs) over
loopback, driven step by step so tests can submit exactly what they need."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from grpclib.client import Channel

from telha_proto.telha.worker.v1 import (
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

    def __init__(self, stub: WorkerServiceStub, worker_id: str) -> None:
        self.stub = stub
        self.worker_id = worker_id

    async def next_job(
        self, formats: list[str], within_s: float = 10.0, capacity: int = 1
    ) -> JobPayload:
        """Open a PollJobs stream, take its first job and close the stream."""
        with anyio.fail_after(within_s):
            request = PollJobsRequest(worker_id=self.worker_id, formats=formats, capacity=capacity)
            async for job in self.stub.poll_jobs(request):
                return job
        raise AssertionError("PollJobs stream ended without a job")

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
        yield ScriptedWorker(WorkerServiceStub(channel, metadata=metadata), worker_id)
    finally:
        channel.close()
