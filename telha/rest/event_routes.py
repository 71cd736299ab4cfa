"""``GET /v1/ingest/{jobId}/events``: a job's events as Server-Sent Events, live
(docs/rest-api.md, "Live events").

Each event of the job's list (the ``events`` of ``GET /v1/ingest/{jobId}``) is one SSE message:
``id`` its sequence number, ``data`` the event's JSON (``{at, transition, detail}``). The
stream sends the events after ``Last-Event-ID`` (all of them without it), then each new one
as it is committed, and ends after the terminal one (the job's state is in
:data:`~telha.domain.model.TERMINAL_JOB_STATES`). It also ends when the client goes away or
the service shuts down; a client reconnects with ``Last-Event-ID`` and misses nothing.

The stream always reads the database: a wake-up from this process's store
(:mod:`telha.storage.job_watch`) makes it read at once, and it re-reads every
``server.events_reread_s`` anyway, which is how another replica's events reach it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import msgspec
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Send
from starlette.types import Scope as AsgiScope

from telha.domain.errors import NotFound, QuotaExceeded, Unavailable
from telha.domain.model import TERMINAL_JOB_STATES, JobEventPage, Scope
from telha.rest.access import require_access, require_admitted
from telha.rest.openapi_parts import ERRORS, INT, QUOTA, SECURED, UUID, answer, param
from telha.rest.params import parse_int, parse_uuid
from telha.rest.state import AppState, state
from telha.wire import JobEventOut

__all__ = ["openapi_paths", "routes"]

#: Events read (and sent) per database read; a longer list is read in pages at once.
PAGE = 500
#: Seconds between keep-alive comments on an idle stream (for proxies).
_PING_S = 15
#: Seconds a send may take before the stream is dropped (a client that stopped reading).
_SEND_TIMEOUT_S = 30


class _EventStream(EventSourceResponse):
    """An :class:`EventSourceResponse` that gives back its slot of
    ``server.max_event_streams`` when it ends, however it ends."""

    def __init__(self, events: AsyncIterator[ServerSentEvent], release: Callable[[], None]):
        super().__init__(events, ping=_PING_S, send_timeout=_SEND_TIMEOUT_S)
        self._release = release

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _message(seq: int, at: int, transition: str, detail: str | None) -> ServerSentEvent:
    data = msgspec.json.encode(JobEventOut(at=at, transition=transition, detail=detail))
    return ServerSentEvent(data=data.decode(), id=str(seq))


async def _woken(wakeup: anyio.Event, shutdown: anyio.Event, timeout_s: float) -> bool:
    """Wait for ``wakeup``, ``shutdown`` or ``timeout_s``; ``False`` once shutting down."""
    with anyio.move_on_after(timeout_s):
        async with anyio.create_task_group() as tg:

            async def first(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(first, wakeup)
            tg.start_soon(first, shutdown)
    return not shutdown.is_set()


async def _events(
    st: AppState, scope: Scope, job_id: bytes, after: int, page: JobEventPage
) -> AsyncIterator[ServerSentEvent]:
    """The messages of ``page``, then of every later read, until the job is terminal and
    every event was sent, the job is gone, or the service shuts down. A wake-up is armed
    before each read, so an event committed between a read and the wait wakes it."""
    store, reread_s = st.store, st.config.server.events_reread_s
    with store.job_events.watch(job_id) as watch:
        armed: anyio.Event | None = None  # the first page was read before watching
        while True:
            for seq, e in page.events:
                yield _message(seq, e.at, e.transition, e.detail)
                after = seq
            if len(page.events) < PAGE:  # nothing more to read now
                if page.state in TERMINAL_JOB_STATES:
                    return
                if armed is not None and not await _woken(armed, st.shutdown, reread_s):
                    return
            if st.shutdown.is_set():
                return
            armed = watch.armed()
            next_page = await store.jobs.events_after(scope, job_id, after, limit=PAGE)
            if next_page is None:  # removed meanwhile (erased or collected)
                return
            page = next_page


async def job_events(request: Request) -> Response:
    """GET /v1/ingest/{jobId}/events: the job's events as Server-Sent Events, from after
    ``Last-Event-ID`` (a sequence number; default 0: every event) until the terminal one.

    :raises NotFound: no such job in the key's scope, or its source's ACL admits none of
        the request's principals (docs/rest-api.md, "Principals").
    :raises RequestError: ``Last-Event-ID`` is not a non-negative integer.
    :raises QuotaExceeded: the scope holds its share of the streams (``max_event_streams``,
        docs/operations.md "Fair slots").
    :raises Unavailable: ``server.max_event_streams`` streams are open, or shutting down.
    """
    access = await require_access(request)
    scope = access.scope
    job_id = parse_uuid(request.path_params["job_id"], "job")
    after = parse_int(request.headers.get("last-event-id"), "Last-Event-ID") or 0
    st = state(request)
    if st.shutdown.is_set():
        raise Unavailable("shutting down")
    if access.principals is not None:  # a job of a source not seen: as if absent
        job = await st.queue.get(scope, job_id)
        await require_admitted(request, access, job.source_id if job else b"", "no such job")
    limits = await st.quotas.limits(scope)
    try:
        st.event_streams.take(scope, limits.max_event_streams)
    except QuotaExceeded:
        st.quotas.count_refusal()
        raise

    def release() -> None:
        st.event_streams.release(scope)

    try:
        page = await st.store.jobs.events_after(scope, job_id, after, limit=PAGE)
        if page is None:
            raise NotFound("no such job")
    except BaseException:
        release()
        raise
    return _EventStream(_events(st, scope, job_id, after, page), release)


routes = [Route("/v1/ingest/{job_id}/events", job_events, methods=["GET"])]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/ingest/{jobId}/events": {
            "get": {
                "summary": "A job's events as Server-Sent Events, live, until the terminal one",
                "description": (
                    "text/event-stream: one message per event of the job's list (as GET"
                    " /v1/ingest/{jobId} shows them), `id` its sequence number and `data`"
                    " the JobEventOut JSON, oldest first: those already written, then each"
                    " one as it is written; the stream ends after the terminal event"
                    " (completed, dead, cancelled). Reconnect with Last-Event-ID to resume"
                    " after it."
                ),
                "security": SECURED,
                "parameters": [
                    param("jobId", "path", UUID, "job id"),
                    param(
                        "Last-Event-ID",
                        "header",
                        INT,
                        "resume after this event (its id, a sequence number); default 0",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the event stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "503": answer(
                        "ErrorBody",
                        "UNAVAILABLE: server.max_event_streams streams open, or shutting down",
                    ),
                    **ERRORS,
                    "429": answer(
                        "ErrorBody",
                        "QUOTA_EXCEEDED: the scope holds its max_event_streams, or RATE_LIMITED",
                    )
                    | {"headers": QUOTA["headers"]},
                },
            },
        },
    }
