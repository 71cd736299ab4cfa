"""An answer sent before its request's body was read says ``Connection: close``; one sent
after the body was read keeps the connection (docs/rest-api.md, "Errors";
``telha/rest/unread_body.py``). Raw sockets against the session's real server on 127.0.0.1,
both engines."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

from tests.support.server import ServerProcess

WAIT_S = 30


def _exchange(
    server: ServerProcess, head: bytes, body: bytes = b""
) -> tuple[int, dict[str, str], socket.socket]:
    """Send ``head`` (and ``body``), read one answer's status line and headers; the socket
    stays open for the caller."""
    url = urlsplit(server.base_url)
    sock = socket.create_connection((url.hostname, url.port), timeout=WAIT_S)
    sock.sendall(head + body)
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        assert chunk, raw
        raw += chunk
    lines = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    return status, headers, sock


def _closed(sock: socket.socket) -> bool:
    """Whether the server ends the connection once its answer is out (EOF after the rest)."""
    sock.settimeout(WAIT_S)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return True


def test_an_answer_before_the_body_is_read_closes_the_connection(server: ServerProcess) -> None:
    body = json.dumps({"format": "json", "name": "x.json", "content": "[]"}).encode()
    head = (
        b"POST /v1/ingest HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: not-a-key\r\n"
        b"content-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
    )
    status, headers, sock = _exchange(server, head)  # the body is never sent
    with sock:
        assert status == 401
        assert headers.get("connection", "").lower() == "close", headers
        assert _closed(sock)


def test_an_answer_after_the_body_was_read_keeps_the_connection(
    server: ServerProcess, scope_key: str
) -> None:
    body = json.dumps({"format": "json", "name": "kept.json", "content": "[1]"}).encode()
    head = (
        b"POST /v1/ingest HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: "
        + scope_key.encode()
        + b"\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
    )
    status, headers, sock = _exchange(server, head, body)
    with sock:
        assert status < 500, (status, headers)  # whatever the answer: the body was read first
        assert headers.get("connection", "").lower() != "close", headers
        # The connection is kept: a second request on it is answered (after what is left of
        # the first answer's body).
        sock.sendall(b"GET /readyz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        seen = b""
        while b"HTTP/1.1 " not in seen or not seen.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, seen
            seen += chunk
        assert b"HTTP/1.1 200" in seen, seen


def test_a_request_without_a_body_keeps_the_connection(server: ServerProcess) -> None:
    head = b"GET /v1/sources HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: not-a-key\r\n\r\n"
    status, headers, sock = _exchange(server, head)
    with sock:
        assert status == 401
        assert headers.get("connection", "").lower() != "close", headers
