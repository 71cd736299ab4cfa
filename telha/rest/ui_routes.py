"""The provenance viewer at ``/ui/`` (docs/viewer.md): the package's static files, no key.

Every data call the page makes goes to ``/v1`` with the ``x-api-key`` the user typed; the
files themselves hold no data. Each answer carries a Content-Security-Policy that allows
scripts, styles, fetches and images from this origin only (``blob:`` images: rendered pages
fetched with the key) and no inline script or style element, so text from a document can
never run even if it reached the page as markup.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "routes"]

#: The policy of every ``/ui/`` answer: this origin only, no inline script, no framing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:;"
    " connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none';"
    " frame-ancestors 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
]


class _WithPolicy:
    """Wraps ``app`` (the static files), adding the policy headers to its answers."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_HEADERS]}
            await send(message)

        await self._app(scope, receive, send_with_headers)


async def _to_slash(request: Request) -> Response:
    """GET /ui — the viewer lives at ``/ui/`` (its files are relative to it)."""
    return RedirectResponse("/ui/", status_code=308)


routes = [
    Route("/ui", _to_slash, methods=["GET"]),
    Mount(
        "/ui",
        app=_WithPolicy(StaticFiles(packages=[("telha.ui", "static")], html=True)),
        name="ui",
    ),
]
