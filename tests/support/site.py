"""A small web site served by the test itself on 127.0.0.1 (port 0), for web_worker tests and
benchmarks: pages are set (and changed) per path; every request is recorded."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Response", "Site", "serve_site"]


@dataclass
class Response:
    """What one path answers."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to wait before answering (a slow server).
    delay_s: float = 0.0


class Site:
    """Routes of the site; thread-safe (the server answers from its own threads)."""

    def __init__(self) -> None:
        self.routes: dict[str, Response] = {}
        self.hits: list[str] = []
        self.base = ""
        self._lock = threading.Lock()

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (``/a.html``)."""
        return f"{self.base}{path}"

    def page(self, path: str, html: str | bytes, **kw: object) -> str:
        """Serve ``html`` at ``path``; returns its URL."""
        body = html.encode() if isinstance(html, str) else html
        self.routes[path] = Response(body, **kw)  # type: ignore[arg-type]
        return self.url(path)

    def redirect(self, path: str, to: str, status: int = 302) -> str:
        """Answer ``path`` with a redirect to ``to``; returns its URL."""
        self.routes[path] = Response(b"", status, "text/plain", {"Location": to})
        return self.url(path)

    def answer(self, path: str) -> Response:
        with self._lock:
            self.hits.append(path)
        return self.routes.get(path) or Response(b"<h1>not here</h1>", 404)

    def hit_count(self, path: str) -> int:
        with self._lock:
            return self.hits.count(path)


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            resp = site.answer(self.path)
            if resp.delay_s:
                time.sleep(resp.delay_s)
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.content_type)
            self.send_header("Content-Length", str(len(resp.body)))
            for k, v in resp.headers.items():
                self.send_header(k, v)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client gave up
                self.wfile.write(resp.body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serve_site() -> Iterator[Site]:
    """A :class:`Site` listening on 127.0.0.1 (a free port) for the ``with`` block."""
    site = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="test-site", daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
