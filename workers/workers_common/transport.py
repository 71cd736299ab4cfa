"""The gRPC transport of :class:`~workers_common.consumer.WorkerConsumer` (grpclib +
betterproto2 stubs), authenticated with ``authorization: Bearer <worker token>``.

Every call leaves its task's cancellation count as it found it (:func:`_balanced`): grpclib
wakes a call whose connection was lost (``StreamTerminatedError``) or whose deadline passed
(``TimeoutError``) with a native ``Task.cancel()`` that it turns into that error without
``Task.uncancel()``. Left so, anyio takes the extra request for an outer cancellation and
lets the consumer's own task-group cancel escape as ``CancelledError``: the worker process
died with a traceback after a core SIGKILL instead of reconnecting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from grpclib.client import Channel
from grpclib.config import Configuration

from telha_proto.telha.worker.v1 import (
    ContentChunk,
    FetchContentRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    IngestionResult,
    JobPayload,
    PollJobsRequest,
    SubmitResponse,
    WorkerServiceStub,
)

__all__ = ["GrpcTransport", "h2_config", "split_target"]

_T = TypeVar("_T")


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


def _cancelling() -> tuple[asyncio.Task[Any] | None, int]:
    task = asyncio.current_task()
    return task, (task.cancelling() if task is not None else 0)


def _rebalance(task: asyncio.Task[Any] | None, before: int) -> None:
    """Withdraw the cancellation requests grpclib made on ``task`` since it had ``before``."""
    if task is not None:
        while task.cancelling() > before:
            task.uncancel()


async def _balanced(call: Callable[[], Awaitable[_T]]) -> _T:
    """Await a grpclib call; if it fails with anything but a cancellation, withdraw the
    native cancellations grpclib used to wake it (see the module docstring)."""
    task, before = _cancelling()
    try:
        return await call()
    except Exception:
        _rebalance(task, before)
        raise


async def _balanced_stream(stream: AsyncIterator[_T]) -> AsyncIterator[_T]:
    """The messages of a grpclib server stream, rebalanced like :func:`_balanced` when the
    stream fails (each wait for a message is measured from its own start)."""
    while True:
        task, before = _cancelling()
        try:
            message = await anext(stream)
        except StopAsyncIteration:
            return
        except Exception:
            _rebalance(task, before)
            raise
        yield message


class GrpcTransport:
    """``WorkerService`` over one grpclib channel.

    :param target: ``host:port`` of ``telha serve``'s gRPC listener.
    :param token: a worker token from ``telha api-key worker-token``.
    """

    def __init__(self, target: str, token: str) -> None:
        host, port = split_target(target)
        self._channel = Channel(host, port, config=h2_config())
        self._stub = WorkerServiceStub(self._channel, metadata={"authorization": f"Bearer {token}"})

    def poll_jobs(self, request: PollJobsRequest) -> AsyncIterator[JobPayload]:
        """The server stream of leased jobs (no deadline); a lost connection ends it with
        ``StreamTerminatedError``."""
        return _balanced_stream(self._stub.poll_jobs(request))

    async def submit(self, result: IngestionResult) -> SubmitResponse:
        """``SubmitIngestionResult`` (deadline :data:`SUBMIT_TIMEOUT_S`)."""
        return await _balanced(
            lambda: self._stub.submit_ingestion_result(result, timeout=SUBMIT_TIMEOUT_S)
        )

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        """``Heartbeat`` (deadline :data:`HEARTBEAT_TIMEOUT_S`)."""
        return await _balanced(lambda: self._stub.heartbeat(request, timeout=HEARTBEAT_TIMEOUT_S))

    def fetch_content(self, request: FetchContentRequest) -> AsyncIterator[ContentChunk]:
        """The server stream of a held job's stored raw bytes (no deadline: it may be GBs)."""
        return _balanced_stream(self._stub.fetch_content(request))

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
