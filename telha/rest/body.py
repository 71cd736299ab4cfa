"""Reading a request body: the one place every route that reads one goes through
(docs/operations.md, "Slow and idle clients").

A body must make progress: a wait of more than ``server.body_idle_timeout_s`` for its next
bytes is answered ``408 REQUEST_TIMEOUT``, so an idle client gives its slot back. A body that
ends before its ``Content-Length`` (the client closed its side, or the connection broke) is
answered ``400 INVALID_REQUEST`` — sent if the client still listens, never logged as an
unhandled error.

hypercorn's own ``read_timeout`` is not used for this: it bounds every read of the
connection, so it would also cut open event streams (whose clients send nothing) and
kept-alive connections, and it closes the connection without an answer. Idle connections
without a request are hypercorn's ``keep_alive_timeout`` (:mod:`telha.rest.server`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

import anyio
from starlette.requests import ClientDisconnect, Request

from telha.domain.errors import PayloadTooLarge, RequestError, RequestTimeout
from telha.rest.state import state

__all__ = ["body_chunks", "read_body"]

_TRUNCATED = (
    "the request body ended before its Content-Length (or its last chunk):"
    " the client closed the connection"
)


async def body_chunks(request: Request) -> AsyncGenerator[bytes, None]:
    """The request body's chunks as they arrive (bytes, possibly empty).

    :raises RequestTimeout: no bytes for ``server.body_idle_timeout_s`` seconds.
    :raises RequestError: the body ended before it was complete (client disconnected).
    """
    idle_s = state(request).config.server.body_idle_timeout_s
    chunks = request.stream()
    try:
        while True:
            with anyio.move_on_after(idle_s) as waited:
                chunk = await anext(chunks, None)
            if waited.cancelled_caught:
                raise RequestTimeout(
                    f"the request body sent nothing for {idle_s:g} s (server.body_idle_timeout_s)"
                )
            if chunk is None:
                return
            yield chunk
    except ClientDisconnect:
        raise RequestError(_TRUNCATED) from None
    finally:
        await chunks.aclose()


async def read_body(request: Request, limit: int) -> bytes:
    """The whole request body, refusing more than ``limit`` bytes as soon as it is known.

    :raises PayloadTooLarge: ``Content-Length`` or the bytes received exceed ``limit``.
    :raises RequestTimeout: no bytes for ``server.body_idle_timeout_s`` seconds.
    :raises RequestError: the body ended before it was complete (client disconnected).
    """
    declared = request.headers.get("content-length", "")
    too_large = f"request body is over ingest.max_body_bytes ({limit} bytes)"
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(too_large)
    parts: list[bytes] = []
    size = 0
    async with aclosing(body_chunks(request)) as chunks:
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(too_large)
            parts.append(chunk)
    return b"".join(parts)
