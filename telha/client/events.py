"""Reading a job's live event stream (``GET /v1/ingest/{jobId}/events``, docs/rest-api.md
"Live events") with httpx-sse: what :meth:`telha.client.AsyncTelha.wait` follows.

One connection yields ``(seq, event)`` pairs until the server ends the stream (after the
job's terminal event, or at its shutdown) or the connection drops; the caller reconnects
with the last ``seq`` (sent as ``Last-Event-ID``) and misses nothing. A server that has no
such route (an older one) answers 404 or 405 before any event: :class:`EventsUnsupported`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import msgspec
from httpx_sse import SSEError, aconnect_sse

from telha.client.errors import ConnectionFailed, TelhaError
from telha.wire import JobEventOut

__all__ = ["EventsUnsupported", "follow_events"]

_EVENT = msgspec.json.Decoder(JobEventOut)


class EventsUnsupported(Exception):
    """The server answered 404 or 405 for the events route: an older server without it,
    or (404) no such job; the caller polls ``GET /v1/ingest/{jobId}``, which tells them
    apart."""


async def follow_events(
    http: httpx.AsyncClient,
    job_id: str,
    after: int,
    error: Callable[[httpx.Response], TelhaError],
) -> AsyncIterator[tuple[int, JobEventOut]]:
    """``(seq, event)`` of the job's events after ``after``, as the server sends them, over
    one connection; ends when the server ends the stream.

    :param error: turns an error answer (its body read) into the client's error class.
    :raises EventsUnsupported: 404 or 405 before the stream started.
    :raises TelhaError: another error answer (401, 400, 503, …).
    :raises ConnectionFailed: no answer, or the connection dropped mid-stream.
    """
    url = f"/v1/ingest/{job_id}/events"
    headers = {"Last-Event-ID": str(after)}
    try:
        async with aconnect_sse(http, "GET", url, headers=headers) as source:
            resp = source.response
            if resp.status_code in (404, 405):
                raise EventsUnsupported(f"{resp.status_code} for {url}")
            if resp.status_code >= 400:
                await resp.aread()
                raise error(resp)
            async for sse in source.aiter_sse():
                if not sse.id or not sse.data:  # keep-alive comments carry neither
                    continue
                yield int(sse.id), _EVENT.decode(sse.data)
    except httpx.TransportError as exc:
        raise ConnectionFailed(f"{type(exc).__name__}: {exc}", status=0) from exc
    except (SSEError, msgspec.DecodeError, ValueError) as exc:
        raise ConnectionFailed(f"not an event stream: {exc}", status=0) from exc
