"""The gRPC transport of :class:`~workers_common.consumer.WorkerConsumer` (grpclib +
betterproto2 stubs), authenticated with ``authorization: Bearer <worker token>``."""

from __future__ import annotations

from typing import Any

from grpclib.client import Channel
from grpclib.config import Configuration

from telha_proto.telha.worker.v1 import (
    FetchContentRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    IngestionResult,
    PollJobsRequest,
    SubmitResponse,
    WorkerServiceStub,
)

__all__ = ["GrpcTransport", "h2_config", "split_target"]


def h2_config() -> Configuration:
    """grpclib settings for both ends: HTTP/2 flow-control windows of 32 MiB (connection) and
    16 MiB (stream). A 10,000-row partial is ~5 MB of JSON, over grpclib's 4 MiB default,
    which stalls it for a WINDOW_UPDATE round trip."""
    return Configuration(
        http2_connection_window_size=32 * 1024 * 1024,
        http2_stream_window_size=16 * 1024 * 1024,
    )


#: Seconds a unary call may take (a large submission is applied before the answer).
SUBMIT_TIMEOUT_S = 600.0
HEARTBEAT_TIMEOUT_S = 30.0


def split_target(target: str) -> tuple[str, int]:
    """``"127.0.0.1:7626"`` → ``("127.0.0.1", 7626)``; raises ``ValueError`` when malformed."""
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"TELHA_GRPC_TARGET must be host:port, got {target!r}")
    return host.strip("[]"), int(port)


class GrpcTransport:
    """``WorkerService`` over one grpclib channel.

    :param target: ``host:port`` of ``telha serve``'s gRPC listener.
    :param token: a worker token from ``telha api-key worker-token``.
    """

    def __init__(self, target: str, token: str) -> None:
        host, port = split_target(target)
        self._channel = Channel(host, port, config=h2_config())
        self._stub = WorkerServiceStub(self._channel, metadata={"authorization": f"Bearer {token}"})

    def poll_jobs(self, request: PollJobsRequest) -> Any:
        """The server stream of leased jobs (no deadline)."""
        return self._stub.poll_jobs(request)

    async def submit(self, result: IngestionResult) -> SubmitResponse:
        """``SubmitIngestionResult``."""
        return await self._stub.submit_ingestion_result(result, timeout=SUBMIT_TIMEOUT_S)

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        """``Heartbeat``."""
        return await self._stub.heartbeat(request, timeout=HEARTBEAT_TIMEOUT_S)

    def fetch_content(self, request: FetchContentRequest) -> Any:
        """The server stream of a held job's stored raw bytes (no deadline: it may be GBs)."""
        return self._stub.fetch_content(request)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
