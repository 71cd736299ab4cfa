"""The gRPC front actor: grpclib serving :class:`WorkerServicer` on a socket we bind, with
worker-token authentication in a ``RecvRequest`` hook (handlers do not see metadata)."""

from __future__ import annotations

import anyio
import anyio.abc
import structlog
from grpclib import GRPCError, Status
from grpclib.events import RecvRequest, listen
from grpclib.server import Server

from telha.grpc.servicer import WorkerServicer, current_auth
from telha.sockets import bind_tcp
from telha.tokens import InvalidToken, TokenVerifier
from workers_common.transport import h2_config

__all__ = ["GrpcFront"]

log = structlog.get_logger("telha.grpc")


class GrpcFront:
    """Serves ``servicer`` on ``addr`` until cancelled; ``run`` reports the bound address.

    :param token_key: HMAC key worker tokens are verified with.
    """

    def __init__(self, servicer: WorkerServicer, addr: str, token_key: bytes) -> None:
        self._servicer = servicer
        self._addr = addr
        self._tokens = TokenVerifier(token_key)

    async def _authenticate(self, event: RecvRequest) -> None:
        header = event.metadata.get("authorization", "")
        token = header.removeprefix("Bearer ").strip() if isinstance(header, str) else ""
        if not token:
            raise GRPCError(Status.UNAUTHENTICATED, "missing authorization: Bearer <worker token>")
        try:
            current_auth.set(self._tokens.verify(token))
        except InvalidToken as exc:
            raise GRPCError(Status.UNAUTHENTICATED, str(exc)) from None

    async def run(self, *, task_status: anyio.abc.TaskStatus[str]) -> None:
        """Actor body; closes the server (shielded) when cancelled, detaching its open
        ``PollJobs`` streams first (their jobs keep their leases)."""
        server = Server([self._servicer], config=h2_config())
        listen(server, RecvRequest, self._authenticate)
        sock = bind_tcp(self._addr)
        host, port = sock.getsockname()[:2]
        await server.start(sock=sock)
        bound = f"{host}:{port}"
        log.info("grpc_listening", addr=bound)
        try:
            task_status.started(bound)
            await server.wait_closed()
        finally:
            with anyio.CancelScope(shield=True):
                # Core closes these streams, their workers live on: no failover for them.
                self._servicer.detach_streams()
                server.close()
                await server.wait_closed()
                log.info("grpc_stopped")
