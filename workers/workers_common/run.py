"""``python -m workers_common.run <worker_module>``: run a format worker against a remote
``telha serve`` (docs/worker-protocol.md, "Workers as separate processes").

Reads ``TELHA_GRPC_TARGET`` (``host:port``) and ``TELHA_WORKER_TOKEN``. While core is
unreachable it retries with exponential backoff (0.5 s doubling, capped at 30 s), saying so
on stderr; after a stream that was healthy (it delivered a job or stayed open
:data:`HEALTHY_STREAM_S`) the backoff starts over (:func:`reconnect_delay`). A rejected
token or a bad module ends the process with exit code 2.

Logs are JSON lines on stderr (console lines on a terminal), each line about a job carrying
its ``job_id``, ``kind``, ``source_id``, ``attempt`` and scope (:mod:`workers_common.logs`).
With ``--http-port`` (0: any free port) the process serves ``GET /health`` and
``GET /metrics`` on ``--http-host`` (default 127.0.0.1) and logs the bound address as
``http_listening`` (:mod:`workers_common.http`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from types import ModuleType

import anyio
from grpclib import GRPCError, Status
from grpclib.exceptions import StreamTerminatedError

from workers_common.consumer import HEARTBEAT_INTERVAL_SECS, WorkerConsumer
from workers_common.gc_tuning import limit_malloc_arenas, tune_gc
from workers_common.handlers import module_lifespan
from workers_common.http import health_app, serve_http
from workers_common.logs import configure_logging
from workers_common.metrics import WorkerMetrics
from workers_common.projection import module_spec
from workers_common.transport import GrpcTransport, split_target

__all__ = ["HEALTHY_STREAM_S", "load_worker", "main", "reconnect_delay"]

log = logging.getLogger("workers_common.run")
_BACKOFF_FIRST_S = 0.5
_BACKOFF_MAX_S = 30.0
#: Seconds a ``PollJobs`` stream must have stayed up (if it delivered no job) to count as
#: healthy, so that the reconnect after it waits the first delay again.
HEALTHY_STREAM_S = 10.0


def reconnect_delay(previous_s: float | None, *, healthy: bool) -> float:
    """Seconds to wait before reconnecting to core: 0.5 after a healthy stream (or the first
    failure, ``previous_s is None``), else twice ``previous_s``, at most 30.

    Pure; a stream is healthy when it delivered a job or stayed open
    :data:`HEALTHY_STREAM_S` seconds (so a worker that lost several cores in a row, each
    after serving it, reconnects at once, not after 30 s).
    """
    if previous_s is None or healthy:
        return _BACKOFF_FIRST_S
    return min(_BACKOFF_MAX_S, previous_s * 2)


class UsageError(Exception):
    """Bad arguments or environment: exit code 2 with the message."""


def load_worker(name: str) -> ModuleType:
    """Import a worker module and check it has ``FORMATS`` and ``handle``.

    :raises UsageError: missing module or missing attributes.
    """
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"cannot import worker module {name!r}: {exc}") from None
    if not callable(getattr(module, "handle", None)) or not getattr(module, "FORMATS", None):
        raise UsageError(f"{name} is not a worker module (needs FORMATS and handle(job))")
    return module


#: Set once a stop signal arrived: whatever the cancellation then unwinds is a clean exit.
_stopping = threading.Event()

_FATAL = (Status.UNAUTHENTICATED, Status.PERMISSION_DENIED, Status.INVALID_ARGUMENT)


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise UsageError(
            f"{name} is not set. Export TELHA_GRPC_TARGET=host:port (telha serve's grpc_addr) and"
            " TELHA_WORKER_TOKEN=$(telha api-key worker-token --tenant T --org O --config PATH)"
        )
    return value


async def _serve(args: argparse.Namespace, module: ModuleType, target: str, token: str) -> None:
    """Run until SIGINT/SIGTERM, which stop polling and end the process with exit 0 (a job in
    hand is abandoned; its stream closes and core hands it to another worker at once)."""
    metrics = WorkerMetrics(args.worker)
    http_done = anyio.Event()  # the HTTP endpoint outlives polling and shuts down gracefully
    async with anyio.create_task_group() as outer:
        if args.http_port is not None:
            app = health_app(metrics, list(module.FORMATS))
            await outer.start(serve_http, app, args.http_host, args.http_port, http_done)
        try:
            async with anyio.create_task_group() as tg:

                async def stop_on_signal() -> None:
                    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                        async for signum in signals:
                            log.info("%s: stopping", signal.Signals(signum).name)
                            _stopping.set()
                            tg.cancel_scope.cancel()
                            return

                tg.start_soon(stop_on_signal)
                async with module_lifespan(module):
                    await _poll_forever(args, module, target, token, metrics)
                tg.cancel_scope.cancel()
        finally:
            http_done.set()


async def _poll_forever(
    args: argparse.Namespace, module: ModuleType, target: str, token: str, metrics: WorkerMetrics
) -> None:
    delay: float | None = None
    while True:
        transport = GrpcTransport(target, token)
        consumer = WorkerConsumer(
            transport,
            module.handle,
            list(module.FORMATS),
            worker_id=args.worker_id,
            capacity=args.capacity,
            heartbeat_interval_s=args.heartbeat_interval_s,
            metrics=metrics,
            projection=module_spec(module.__name__, module),
        )
        started = time.monotonic()
        try:
            log.info("polling %s for %s as %s", target, ",".join(module.FORMATS), args.worker_id)
            metrics.set_polling(True)
            await consumer.run()
            delay = reconnect_delay(delay, healthy=True)
        except Exception as exc:  # task groups wrap what the stream raised
            cause = _leaf(exc)
            if isinstance(cause, GRPCError) and cause.status in _FATAL:
                raise UsageError(
                    f"core refused this worker: {cause.status.name}: {cause.message}"
                ) from None
            if not isinstance(cause, GRPCError | OSError | StreamTerminatedError):
                raise
            healthy = consumer.jobs_received > 0 or time.monotonic() - started >= HEALTHY_STREAM_S
            delay = reconnect_delay(delay, healthy=healthy)
            if isinstance(cause, GRPCError):
                log.warning(
                    "core at %s answered %s; retrying in %.1fs", target, cause.status.name, delay
                )
            else:
                log.warning("core unreachable at %s (%s); retrying in %.1fs", target, cause, delay)
        finally:
            metrics.set_polling(False)
            transport.close()
        await anyio.sleep(delay)


def _loop() -> dict[str, object]:
    """anyio's asyncio backend options: uvloop when installed (as ``telha serve`` runs), its
    C event loop costing less CPU per gRPC message than the stdlib selector loop."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m workers_common.run")
    parser.add_argument("worker", help="worker module, e.g. text_worker")
    parser.add_argument("--capacity", type=int, default=1, help="jobs in flight at once")
    parser.add_argument("--worker-id", default=f"{socket.gethostname()}-{os.getpid()}")
    parser.add_argument(
        "--heartbeat-interval-s",
        type=float,
        default=float(os.environ.get("TELHA_HEARTBEAT_INTERVAL_SECS", HEARTBEAT_INTERVAL_SECS)),
    )
    parser.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="serve GET /health and GET /metrics on this port (0: any free port; default: off)",
    )
    parser.add_argument(
        "--http-host", default="127.0.0.1", help="address --http-port binds (default 127.0.0.1)"
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error", "critical"),
        help="logging level (default info)",
    )
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        module = load_worker(args.worker)
        target, token = _env("TELHA_GRPC_TARGET"), _env("TELHA_WORKER_TOKEN")
        split_target(target)
        tune_gc()
        limit_malloc_arenas()
        anyio.run(_serve, args, module, target, token, backend="asyncio", backend_options=_loop())
    except (UsageError, ValueError) as exc:
        sys.stderr.write(f"workers_common.run: {exc}\n")
        return 2
    except (KeyboardInterrupt, SystemExit):
        return 0
    except BaseException as exc:
        cause = _leaf(exc)  # the task group wraps what the polling loop raised
        if isinstance(cause, UsageError):
            sys.stderr.write(f"workers_common.run: {cause}\n")
            return 2
        # A cancellation can surface from grpclib's stream teardown once we stop on purpose.
        if _stopping.is_set():
            return 0
        raise
    return 0


if __name__ == "__main__":
    # Run as the importable module, so that an exception a worker module raises with
    # ``workers_common.run.UsageError`` (its lifespan refusing to start) is this one.
    from workers_common.run import main as _main

    sys.exit(_main())
