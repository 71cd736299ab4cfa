"""Slow, idle and truncated request bodies and the fair slots, against a real ``telha serve``
on 127.0.0.1 over raw sockets, on both engines (docs/operations.md, "Slow and idle clients"
and "Fair slots"; docs/rest-api.md, "Usage").

The server has ``ingest.max_concurrent = 4`` and ``server.max_event_streams = 4``, so a scope
may hold 2 of each by default. Bodies that trickle a byte every quarter second hold their
slot (they make progress); once they stop, ``server.body_idle_timeout_s`` (2 s here) later
they are answered ``408 REQUEST_TIMEOUT`` and the slot is free. A body cut short by a
half-close is answered ``400 INVALID_REQUEST`` and nothing is logged as an unhandled error.
Nothing here asserts how fast anything is: waits are bounded only so a hang fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from telha.client import AsyncTelha
from tests.support.metrics import scrape, value
from tests.support.server import ServerProcess, write_config

pytestmark = pytest.mark.anyio

IDLE_S = 2
#: Seconds between a trickling body's bytes (well under IDLE_S).
TRICKLE_S = 0.25
#: Upper bound of any wait here (a hang fails; nothing is timed).
WAIT_S = 60


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp(f"slow-{engine}")
    config = write_config(
        folder,
        engine,
        workers={"in_process": []},  # jobs stay pending: their event streams stay open
        ingest={"max_concurrent": 4},
        server={"max_event_streams": 4, "body_idle_timeout_s": IDLE_S},
    )
    with ServerProcess(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@dataclass
class Answer:
    """A raw HTTP/1.1 answer: status, headers (lower-case names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def error_code(self) -> str:
        return str(json.loads(self.body)["error"]["code"])


def _parse(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, val = line.partition(":")
        headers[name.strip().lower()] = val.strip()
    return Answer(int(lines[0].split()[1]), headers, body)


async def _read_answer(stream: anyio.abc.ByteStream) -> Answer:
    """Everything the server sends until it closes the connection."""
    raw = b""
    with anyio.fail_after(WAIT_S):
        while True:
            try:
                raw += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
    return _parse(raw)


class Scoped:
    """A fresh scope: its key, an HTTP client and raw connections to the server."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.tenant = f"slow-{uuid.uuid4()}"
        self.key = server.create_key(self.tenant, "org")
        self.http = httpx.AsyncClient(
            base_url=server.base_url, headers={"x-api-key": self.key}, timeout=WAIT_S
        )
        host, _, port = server.base_url.removeprefix("http://").rpartition(":")
        self.addr = (host, int(port))

    async def usage(self) -> dict[str, Any]:
        resp = await self.http.get("/v1/usage")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    async def until_usage(self, field: str, n: int) -> dict[str, Any]:
        """Poll ``GET /v1/usage`` until ``field`` is ``n`` (the server took or freed slots)."""
        with anyio.fail_after(WAIT_S):
            while True:
                usage = await self.usage()
                if usage[field] == n:
                    return usage
                await anyio.sleep(0.05)

    async def ingest(self) -> httpx.Response:
        body = {"format": "json", "name": f"{uuid.uuid4()}.json", "content": '{"a": 1}'}
        return await self.http.post("/v1/ingest", json=body)

    async def connect(
        self,
        path: str = "/v1/ingest",
        content_type: str = "application/json",
        first: bytes = b"{",
        method: str = "POST",
    ) -> anyio.abc.SocketStream:
        """A request to ``path`` that declares 10,000 body bytes and has sent only ``first``."""
        stream = await anyio.connect_tcp(*self.addr)
        head = (
            f"{method} {path} HTTP/1.1\r\nhost: test\r\nx-api-key: {self.key}\r\n"
            f"content-type: {content_type}\r\ncontent-length: 10000\r\n\r\n"
        )
        await stream.send(head.encode() + first)
        return stream


@dataclass
class Trickling:
    """Bodies that send one byte every :data:`TRICKLE_S` until :meth:`stop`."""

    streams: list[anyio.abc.SocketStream] = field(default_factory=list)
    stopped: anyio.Event = field(default_factory=anyio.Event)

    async def _trickle(self, stream: anyio.abc.SocketStream) -> None:
        while not self.stopped.is_set():
            await stream.send(b" ")
            with anyio.move_on_after(TRICKLE_S):
                await self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()


@asynccontextmanager
async def trickling() -> AsyncIterator[tuple[Trickling, anyio.abc.TaskGroup]]:
    bodies = Trickling()
    async with anyio.create_task_group() as tg:
        yield bodies, tg
        bodies.stop()


async def hold(
    scope: Scoped, bodies: Trickling, tg: anyio.abc.TaskGroup, n: int
) -> list[anyio.abc.SocketStream]:
    """Open ``n`` trickling ingests for ``scope`` and wait until it holds them all."""
    held = (await scope.usage())["ingestsInProgress"]
    streams = [await scope.connect() for _ in range(n)]
    for stream in streams:
        bodies.streams.append(stream)
        tg.start_soon(bodies._trickle, stream)
    await scope.until_usage("ingestsInProgress", held + n)
    return streams


def _unhandled(server: ServerProcess) -> list[str]:
    return [line for line in server.log_text().splitlines() if "unhandled_error" in line]


@pytest.fixture
async def scopes(server: ServerProcess) -> AsyncIterator[tuple[Scoped, Scoped, Scoped]]:
    made = (Scoped(server), Scoped(server), Scoped(server))
    async with AsyncExitStack() as stack:
        for s in made:
            await stack.enter_async_context(s.http)
        yield made


async def test_one_scope_cannot_take_every_ingest_slot(
    server: ServerProcess, scopes: tuple[Scoped, Scoped, Scoped]
) -> None:
    a, b, c = scopes
    async with trickling() as (bodies, tg):
        held_a = await hold(a, bodies, tg, 2)
        # A third (and a fourth) ingest of the same scope is refused: its share is full.
        for _ in range(2):
            refused = await a.ingest()
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "QUOTA_EXCEEDED"
            assert "max_concurrent_ingests" in refused.json()["error"]["message"]
            assert refused.headers["retry-after"] == "1"
        # Another scope still ingests.
        served = await b.ingest()
        assert served.status_code == 201, served.text
        usage = await a.usage()
        assert usage["ingestsInProgress"] == 2
        assert usage["limits"]["maxConcurrentIngests"] == 2
        assert (await b.usage())["ingestsInProgress"] == 0
        samples = await scrape(server.base_url)
        assert value(samples, "telha_ingest_in_progress") == 2
        # B takes the other two slots: every slot is held, a third scope gets 503.
        await hold(b, bodies, tg, 2)
        full = await c.ingest()
        assert full.status_code == 503, full.text
        assert full.json()["error"]["code"] == "UNAVAILABLE"
        assert "ingest.max_concurrent" in full.json()["error"]["message"]
        assert value(await scrape(server.base_url), "telha_ingest_in_progress") == 4
        # Once the bodies stop, each is answered 408 and its slot is free.
        bodies.stop()
        for stream in bodies.streams:
            answer = await _read_answer(stream)
            assert answer.status == 408, answer
            assert answer.error_code() == "REQUEST_TIMEOUT"
            assert "server.body_idle_timeout_s" in json.loads(answer.body)["error"]["message"]
            assert answer.headers["connection"] == "close"
            await stream.aclose()
        assert held_a[0] in bodies.streams
    for s in (a, b, c):
        assert (await s.until_usage("ingestsInProgress", 0))["ingestsInProgress"] == 0
        resp = await s.ingest()
        assert resp.status_code == 201, resp.text
    assert value(await scrape(server.base_url), "telha_ingest_in_progress") == 0
    assert not _unhandled(server)


async def test_idle_bodies_of_every_body_route_are_answered_408(
    server: ServerProcess, scopes: tuple[Scoped, Scoped, Scoped]
) -> None:
    """Bodies that never send a byte more: a JSON ingest, a multipart upload, a locate, an
    erase and a retire, all at once (the timeout is the server's, per body)."""
    a, _, _ = scopes
    boundary = "b0undary"
    first_part = (
        f'--{boundary}\r\ncontent-disposition: form-data; name="format"\r\n\r\ntext\r\n'
    ).encode()
    source = uuid.uuid4()
    streams = [
        await a.connect(),
        await a.connect(content_type=f"multipart/form-data; boundary={boundary}", first=first_part),
        await a.connect("/v1/locate"),
        await a.connect(f"/v1/sources/{source}/erase"),
        await a.connect(f"/v1/sources/{source}", method="DELETE"),
    ]
    answers = []
    for stream in streams:
        answers.append(await _read_answer(stream))
        await stream.aclose()
    assert [(x.status, x.error_code()) for x in answers] == [(408, "REQUEST_TIMEOUT")] * 5
    await a.until_usage("ingestsInProgress", 0)
    assert not _unhandled(server)


def _cut_short(addr: tuple[str, int], request: bytes) -> Answer:
    """Send ``request`` and close the sending side at once (blocking; run in a thread), so
    the bytes and the FIN usually reach the server together; then read the answer."""
    with socket.create_connection(addr, timeout=WAIT_S) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    return _parse(raw)


async def test_a_body_cut_short_by_a_half_close_is_a_400(
    server: ServerProcess, scopes: tuple[Scoped, Scoped, Scoped]
) -> None:
    """A body shorter than its Content-Length, then the client closes its side. When the FIN
    comes with the last bytes the app sees the body end and answers 400 INVALID_REQUEST; when
    it comes later, hypercorn itself answers an empty 400 before the app hears of it. Either
    way: 400, never a 500, the slot is free and nothing is logged as unhandled."""
    a, _, _ = scopes
    boundary = "b0undary"
    part = f'--{boundary}\r\ncontent-disposition: form-data; name="format"\r\n\r\ntext'.encode()
    typed = 0
    for content_type, first in (
        ("application/json", b'{"format": "te'),
        (f"multipart/form-data; boundary={boundary}", part),
    ):
        head = (
            f"POST /v1/ingest HTTP/1.1\r\nhost: test\r\nx-api-key: {a.key}\r\n"
            f"content-type: {content_type}\r\ncontent-length: 10000\r\n\r\n"
        )
        for _ in range(3):
            answer = await anyio.to_thread.run_sync(_cut_short, a.addr, head.encode() + first)
            assert answer.status == 400, answer
            if answer.body:
                assert answer.error_code() == "INVALID_REQUEST"
                assert "Content-Length" in json.loads(answer.body)["error"]["message"]
                typed += 1
        # Cut short while it holds its slot.
        stream = await a.connect(content_type=content_type, first=first)
        await a.until_usage("ingestsInProgress", 1)
        await stream.send_eof()
        answer = await _read_answer(stream)
        await stream.aclose()
        assert answer.status == 400, answer
        if answer.body:
            assert answer.error_code() == "INVALID_REQUEST"
        await a.until_usage("ingestsInProgress", 0)
    assert typed >= 1  # the app's own answer reached the client at least once
    assert (await a.ingest()).status_code == 201
    assert not _unhandled(server)


def _scope_set(server: ServerProcess, tenant: str, key: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "telha", "scope", "set", "--tenant", tenant, "--org", "org",
         key, value, "--config", str(server.config)],
        capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def event_stream(scope: Scoped, job_id: str) -> AsyncIterator[httpx.Response]:
    """An open ``GET /v1/ingest/{jobId}/events`` (its headers read)."""
    async with scope.http.stream("GET", f"/v1/ingest/{job_id}/events") as resp:
        yield resp


async def _refused_stream(scope: Scoped, job_id: str) -> httpx.Response:
    """``GET /v1/ingest/{jobId}/events`` expected to be refused: its error answer, read
    whole. A stream that opens instead is closed at once and fails the test."""
    async with scope.http.stream("GET", f"/v1/ingest/{job_id}/events") as resp:
        assert resp.status_code != 200, "the stream was opened, not refused"
        await resp.aread()
    return resp


async def _job(scope: Scoped) -> str:
    resp = await scope.http.post(
        "/v1/ingest", json={"format": "text", "name": f"{uuid.uuid4()}.txt", "content": "x"}
    )
    assert resp.status_code == 202, resp.text
    return str(resp.json()["jobId"])


async def test_one_scope_cannot_take_every_event_stream(
    server: ServerProcess, scopes: tuple[Scoped, Scoped, Scoped]
) -> None:
    a, b, _ = scopes
    job_a, job_b = await _job(a), await _job(b)
    async with AsyncExitStack() as stack:
        for _ in range(2):
            opened = await stack.enter_async_context(event_stream(a, job_a))
            assert opened.status_code == 200
        refused = await _refused_stream(a, job_a)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "QUOTA_EXCEEDED"
        assert "max_event_streams" in refused.json()["error"]["message"]
        assert refused.headers["retry-after"] == "1"
        usage = await a.usage()
        assert (usage["eventStreams"], usage["limits"]["maxEventStreams"]) == (2, 2)
        # Another scope's own stream still answers.
        own = await stack.enter_async_context(event_stream(b, job_b))
        assert own.status_code == 200
        assert (await b.usage())["eventStreams"] == 1
    await a.until_usage("eventStreams", 0)
    await b.until_usage("eventStreams", 0)
    # A scope's own share (telha scope set, before its first request): 0 is every slot.
    every, one = Scoped(server), Scoped(server)
    _scope_set(server, every.tenant, "max_event_streams", "0")
    _scope_set(server, one.tenant, "max_event_streams", "1")
    async with every.http, one.http, AsyncExitStack() as stack:
        job_every, job_one = await _job(every), await _job(one)
        for _ in range(3):
            opened = await stack.enter_async_context(event_stream(every, job_every))
            assert opened.status_code == 200
        usage = await every.usage()
        assert (usage["eventStreams"], usage["limits"]["maxEventStreams"]) == (3, 4)
        opened = await stack.enter_async_context(event_stream(one, job_one))
        assert opened.status_code == 200
        refused = await _refused_stream(one, job_one)
        assert refused.status_code == 429, refused.text
        assert (await one.usage())["limits"]["maxEventStreams"] == 1
        # The client's wait polls when the scope's share of the streams is in use.
        cancelled = await _job(one)
        resp = await one.http.post(f"/v1/ingest/{cancelled}/cancel")
        assert resp.status_code == 200, resp.text
        async with AsyncTelha(server.base_url, one.key) as client:
            done = await client.wait(cancelled, timeout=WAIT_S)
        assert done.state == "cancelled"
        # Every stream is open now: the global limit answers 503.
        full = await _refused_stream(a, job_a)
        assert full.status_code == 503, full.text
        assert "server.max_event_streams" in full.json()["error"]["message"]
    assert not _unhandled(server)
