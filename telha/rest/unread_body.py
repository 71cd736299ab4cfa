"""An answer sent before its request's body was read ends the connection, and says so
(docs/rest-api.md, "Errors").

A route may answer before it reads the body it was sent: an unknown API key (401), a refused
scope or a full slot (403, 429), a body over its limit (413) or one that went idle (408).
HTTP/1.1 then cannot reuse the connection — the rest of the body is still on its way — and
hypercorn closes it once the answer is out, but without saying so first: a client that sends
its next request on the same kept-alive connection in that moment finds it closed before any
answer ("server disconnected without sending a response"). This layer adds
``Connection: close`` (RFC 9112 §9.6) to an answer that starts while a request that carries a
body (``Content-Length`` above 0, or ``Transfer-Encoding``) has not delivered its end, so the
client opens a new connection for its next request instead. A request whose body was read to
its end, and one without a body, are answered as before: the connection is kept.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CloseOnUnreadBody", "carries_body"]


def carries_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request with these ASGI headers (lower-case names) sends a body."""
    for name, value in headers:
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
        if name == b"transfer-encoding":
            return True
    return False


class CloseOnUnreadBody:
    """Pure ASGI middleware around ``app`` (no ``BaseHTTPMiddleware``: bodies stream through
    untouched); see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not carries_body(scope["headers"]):
            await self._app(scope, receive, send)
            return
        ended = False

        async def receive_body() -> Message:
            nonlocal ended
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                ended = True  # the body's last part, or the client went away
            return message

        async def send_answer(message: Message) -> None:
            if message["type"] == "http.response.start" and not ended:
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() != b"connection"
                ]
                headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive_body, send_answer)
