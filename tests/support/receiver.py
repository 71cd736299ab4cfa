"""A real webhook receiver for tests and benchmarks: an HTTP server on 127.0.0.1 (port 0) in a
thread, recording every whole POST (headers and body; one whose body ends before its
``content-length`` is not a delivery) and answering ``status`` (settable, so a
test can make it fail, then recover); :meth:`Receiver.verified` checks each delivery's
Standard Webhooks signature with the ``standardwebhooks`` library."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
from standardwebhooks import Webhook

__all__ = ["Delivery", "Receiver"]


@dataclass(frozen=True)
class Delivery:
    """One POST received: its path, headers (lower-case names) and body."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def job_id(self) -> str:
        return str(self.json["jobId"])


class Receiver:
    """Use as ``with Receiver() as r:``; ``r.url(path)`` is a URL to give the server."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.received: list[Delivery] = []
        #: ``time.monotonic()`` of the latest POST received.
        self.last_at = 0.0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the deliverer reuses connections

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(size)
                if len(body) < size:
                    # The sender died mid-request (the crash tier kills servers): no
                    # delivery, and no answer it could take for an acknowledgement.
                    self.close_connection = True
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver.received.append(Delivery(self.path, headers, body))
                    receiver.last_at = time.monotonic()
                    status = receiver.status
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def deliveries(self, path: str | None = None) -> list[Delivery]:
        """Every POST so far (to ``path`` only, if given), in arrival order."""
        with self._lock:
            return [d for d in self.received if path is None or d.path == path]

    async def wait_for(
        self, n: int, path: str | None = None, *, timeout_s: float = 30.0
    ) -> list[Delivery]:
        """Wait until at least ``n`` POSTs (to ``path``, if given) arrived; all of them.

        :raises AssertionError: not within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.deliveries(path)
            if len(got) >= n:
                return got
            assert time.monotonic() < deadline, f"{len(got)} of {n} deliveries to {path}"
            await anyio.sleep(0.02)

    async def wait_jobs(self, job_ids: set[str], *, timeout_s: float = 60.0) -> None:
        """Wait until every job of ``job_ids`` was delivered at least once.

        :raises AssertionError: not within ``timeout_s`` (the message counts the missing).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            missing = job_ids - {d.job_id for d in self.deliveries()}
            if not missing:
                return
            assert time.monotonic() < deadline, f"{len(missing)} jobs never delivered"
            await anyio.sleep(0.1)

    @staticmethod
    def verified(delivery: Delivery, secret: str) -> Any:
        """The delivery's JSON body once its signature verifies under ``secret``.

        :raises standardwebhooks.webhooks.WebhookVerificationError: it does not.
        """
        return Webhook(secret).verify(delivery.body, delivery.headers)
