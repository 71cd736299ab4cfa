"""Running a worker module's handler code for :class:`~workers_common.consumer.WorkerConsumer`.

A handler is ``handle(job) -> dict | bytes`` (single shot) or a generator yielding submission
dicts (``ids = yield builder.build()``), driven part by part by the consumer with
:func:`advance` and closed with :func:`close_generator`. Plain and generator handlers run in a
worker thread (:func:`call_in_thread`), never on the event loop; an ``async def`` handler
(I/O-bound: ``web_worker`` driving a browser) is awaited on the event loop
(:func:`call_async`) and must keep its CPU-bound work off it (its result is encoded in a
thread). A module that sets ``PROCESS_POOL = True`` (a plain, pure-Python, CPU-bound handler:
``email_worker``, ``code_worker``) runs in a worker process of anyio's process pool
(:func:`call_in_process`) when the consumer is given a ``processes`` limiter, so its parsing
holds no GIL of the process that hosts the consumer (``telha serve``). A worker module may also
expose ``lifespan()``, an async context manager entered once around all its consumers
(:func:`module_lifespan`).

Whatever handler code raises leaves these functions as :class:`HandlerFailed`, its cause the
handler's exception (classified for the wire by the consumer).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
import types
from collections.abc import Callable, Generator
from contextlib import AbstractAsyncContextManager
from types import ModuleType
from typing import Any

import anyio
import anyio.to_process
import msgspec

from telha_proto.telha.worker.v1 import JobPayload
from workers_common.failures import ResourceLimit, as_failure
from workers_common.job import Job

__all__ = [
    "DONE",
    "HANDLER_ERRORS",
    "HandlerFailed",
    "advance",
    "call_async",
    "call_in_process",
    "call_in_thread",
    "close_generator",
    "decode_job",
    "encode",
    "handle",
    "module_lifespan",
]

log = logging.getLogger("workers_common")

#: What :func:`advance` returns once a generator handler has finished.
DONE = object()

#: What handler code may raise and still be only its job's failure: ``SystemExit`` (a library
#: calling ``sys.exit``) and ``KeyboardInterrupt`` too, which asyncio would otherwise let out
#: of the task and stop the whole process (``telha serve`` with it). Other
#: ``BaseException``\ s still end the consumer (cancellation, a deliberate consumer death).
HANDLER_ERRORS = (Exception, SystemExit, KeyboardInterrupt)

#: How long closing a generator waits for a step still running in an abandoned thread.
_CLOSE_WAIT_S = 2.0


class HandlerFailed(Exception):
    """Handler code raised; the cause is the handler's exception (classified for the wire)."""


def advance(gen: Generator[Any, Any, Any], ids: list[str] | None) -> Any:
    """Next submission of a generator handler (``send(ids)`` after the first), or
    :data:`DONE`. StopIteration cannot cross a thread/future boundary, hence the sentinel."""
    try:
        return next(gen) if ids is None else gen.send(ids)
    except StopIteration:
        return DONE


def close_generator(gen: Generator[Any, Any, Any]) -> None:
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
        except HANDLER_ERRORS as exc:  # a handler's cleanup failing must not fail the job again
            log.warning("closing the handler's generator raised: %r", exc)
            return


def module_lifespan(module: ModuleType) -> AbstractAsyncContextManager[Any]:
    """The worker module's ``lifespan()`` context (entered once around its consumers, in the
    task that starts them: process-wide resources such as a browser), or a no-op when it has
    none."""
    factory = getattr(module, "lifespan", None)
    if factory is None:
        return contextlib.nullcontext()
    cm: AbstractAsyncContextManager[Any] = factory()
    return cm


def decode_job(payload: JobPayload) -> tuple[Job, str | None]:
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


def handle(handler: Callable[[Job], Any], job: Job) -> Any:
    """Run the handler; encode a single-shot result (generators are driven part by part by
    the consumer)."""
    result = handler(job)
    return result if isinstance(result, types.GeneratorType) else encode(result)


def _handle_in_child(handler: Callable[[Job], Any], job: Job) -> bytes:
    """The process-pool side of a ``PROCESS_POOL`` module: run the handler and encode its
    submission there, so only bytes cross the pipe back.

    Whatever it raises leaves typed (:func:`~workers_common.failures.as_failure`): the
    traceback the classification reads does not survive the pipe.

    :raises WorkerFailure: the handler's failure; a ``TypeError`` (``transient``) when the
        handler returned a generator (streaming handlers cannot run in a process pool: they
        stay in threads).
    """
    try:
        result = handler(job)
        if isinstance(result, types.GeneratorType):
            result.close()
            raise TypeError(f"{handler.__module__}.handle returned a generator (PROCESS_POOL)")
        return encode(result)
    except HANDLER_ERRORS as exc:
        raise as_failure(exc) from None


def encode(submission: dict[str, Any] | bytes) -> bytes:
    """A submission as the JSON bytes sent to core (bytes pass through)."""
    if isinstance(submission, bytes | bytearray):
        return bytes(submission)
    # msgspec: compact UTF-8 JSON in insertion order, ~5x faster than json.dumps on 10k rows.
    return msgspec.json.encode(submission)


async def call_in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run handler code in a worker thread; its exceptions become :class:`HandlerFailed`."""
    try:
        return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
    except HANDLER_ERRORS as exc:
        raise HandlerFailed() from exc


async def call_in_process(
    handler: Callable[[Job], Any], job: Job, processes: anyio.CapacityLimiter
) -> bytes:
    """Run the handler in a pool process (cancelling kills that process); its exceptions
    become :class:`HandlerFailed`, a process that died a ``resource_limit``."""
    try:
        encoded: bytes = await anyio.to_process.run_sync(
            _handle_in_child, handler, job, cancellable=True, limiter=processes
        )
    except anyio.BrokenWorkerProcess as exc:
        died = ResourceLimit(f"the handler's worker process died: {exc}")
        raise HandlerFailed() from died
    except HANDLER_ERRORS as exc:
        raise HandlerFailed() from exc
    return encoded


async def call_async(handler: Callable[[Job], Any], job: Job) -> bytes:
    """Await an ``async def`` handler on the event loop, then encode its result in a
    thread; its exceptions become :class:`HandlerFailed`."""
    try:
        result = await handler(job)
    except HANDLER_ERRORS as exc:
        raise HandlerFailed() from exc
    encoded: bytes = await call_in_thread(encode, result)
    return encoded
