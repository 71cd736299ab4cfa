"""``GET /v1/ingest/{jobId}/events`` (Server-Sent Events) against a real ``telha serve`` on
127.0.0.1, on both engines: a scripted gRPC worker moves a job step by step while a stream
is open, and each event must arrive while the next step has not happened yet.

The servers re-read an open stream only every 30 s (``server.events_reread_s``), so an event
that arrives within seconds came through the store's in-process wake-up, not the re-read.
``AsyncTelha.wait`` follows the stream (the request counts of ``/metrics`` show which route
it used) and falls back to polling against a server without the route.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import msgspec
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from httpx_sse import aconnect_sse

from telha.client import AsyncTelha, JobEventOut, NotFound
from telha.domain.model import Scope
from tests.support.inproc import InProcessServer
from tests.support.metrics import scrape, value
from tests.support.server import ServerProcess, write_config
from tests.support.worker import ScriptedWorker, scripted_worker

pytestmark = pytest.mark.anyio

#: What the scripted worker submits: a valid single-shot result without nodes.
SUBMISSION = {"v": 1, "canonicalText": "hello\n", "spans": [], "nodes": [], "relationships": []}
#: Seconds an event may take to reach an open stream through the in-process wake-up.
LIVE_S = 5.0
EVENTS_ROUTE = "/v1/ingest/{job_id}/events"
JOB_ROUTE = "/v1/ingest/{job_id}"

Event = tuple[int, dict[str, Any]]


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp(f"events-{engine}")
    config = write_config(
        folder,
        engine,
        workers={"in_process": []},  # the scripted worker takes every job
        jobs={"backoff_base_ms": 10},
        server={"events_reread_s": 30},
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@dataclass
class Api:
    server: InProcessServer
    scope: Scope
    key: str
    http: httpx.AsyncClient

    async def post_text(self, name: str) -> str:
        body = {"format": "text", "name": name, "content": f"content of {name}"}
        resp = await self.http.post("/v1/ingest", json=body)
        assert resp.status_code == 202, resp.text
        return str(resp.json()["jobId"])

    async def job(self, job_id: str) -> dict[str, Any]:
        resp = await self.http.get(f"/v1/ingest/{job_id}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[ScriptedWorker]:
        token = self.server.worker_token(self.scope)
        async with scripted_worker(self.server.grpc_addr, token, "scripted") as w:
            yield w


@pytest.fixture
async def api(server: InProcessServer) -> AsyncIterator[Api]:
    scope = Scope(f"t-{uuid.uuid4()}", "org")
    key = server.create_key(scope.tenant_id, scope.organization_id)
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=30
    ) as http:
        yield Api(server, scope, key, http)


async def _read_stream(
    http: httpx.AsyncClient,
    job_id: str,
    send: MemoryObjectSendStream[Event],
    headers: dict[str, str] | None = None,
) -> None:
    """Every message of the job's stream as ``(id, data)`` into ``send``, which is closed
    when the server ends the stream."""
    url = f"/v1/ingest/{job_id}/events"
    async with send, aconnect_sse(http, "GET", url, headers=headers or {}) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async for sse in source.aiter_sse():
            await send.send((int(sse.id), msgspec.json.decode(sse.data)))


@asynccontextmanager
async def _stream(
    api: Api, job_id: str, headers: dict[str, str] | None = None
) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
    send, receive = anyio.create_memory_object_stream[Event](64)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_stream, api.http, job_id, send, headers)
        with receive:
            yield receive
        tg.cancel_scope.cancel()  # a test that leaves early drops the connection


async def _next(events: MemoryObjectReceiveStream[Event], within_s: float = LIVE_S) -> Event:
    with anyio.fail_after(within_s):
        return await events.receive()


async def _ended(events: MemoryObjectReceiveStream[Event], within_s: float = LIVE_S) -> None:
    """The server ends the stream with nothing more."""
    with anyio.fail_after(within_s):
        rest = [e async for e in events]
    assert rest == []


def _expected(job: dict[str, Any]) -> list[Event]:
    """What a stream of the whole job sends: its events as GET shows them, numbered from 1."""
    return list(enumerate(job["events"], start=1))


async def test_events_arrive_live_in_order_and_the_stream_ends_after_the_terminal_one(
    api: Api,
) -> None:
    job_id = await api.post_text("live.txt")
    async with api.worker() as worker, _stream(api, job_id) as events:
        seq, first = await _next(events)
        assert (seq, first["transition"], first["detail"]) == (1, "enqueued", None)
        job = await worker.next_job(["text"])
        seq, leased = await _next(events)
        assert (seq, leased["transition"], leased["detail"]) == (2, "leased", "worker=scripted")
        await worker.fail(job, "transient: try again")
        seq, retried = await _next(events)
        assert (seq, retried["transition"]) == (3, "retried")
        job = await worker.next_job(["text"])
        assert (await _next(events))[1]["transition"] == "leased"
        assert (await worker.submit(job, SUBMISSION)).accepted
        seq, completed = await _next(events)
        assert (seq, completed["transition"]) == (5, "completed")
        await _ended(events)
    whole = await api.job(job_id)
    assert whole["state"] == "completed"
    assert [first, leased, retried, completed] == [whole["events"][i] for i in (0, 1, 2, 4)]


async def test_last_event_id_resumes_without_repeats(api: Api) -> None:
    job_id = await api.post_text("resume.txt")
    async with api.worker() as worker:
        async with _stream(api, job_id) as events:
            assert (await _next(events))[0] == 1
            job = await worker.next_job(["text"])
            last, _ = await _next(events)
        assert last == 2
        # Disconnected: what happens now is read on reconnecting after event 2.
        await worker.fail(job, "transient: again")
        job = await worker.next_job(["text"])
        async with _stream(api, job_id, {"Last-Event-ID": str(last)}) as events:
            assert [(await _next(events))[0] for _ in range(2)] == [3, 4]
            assert (await worker.submit(job, SUBMISSION)).accepted
            assert (await _next(events))[0] == 5
            await _ended(events)
    whole = await api.job(job_id)
    async with _stream(api, job_id, {"Last-Event-ID": "3"}) as events:
        assert [e async for e in events] == _expected(whole)[3:]


async def test_a_finished_jobs_stream_replays_every_event_and_ends(api: Api) -> None:
    job_id = await api.post_text("finished.txt")
    async with api.worker() as worker:
        job = await worker.next_job(["text"])
        await worker.fail(job, "corrupt_input: not text", permanent=True)
    whole = await api.job(job_id)
    assert whole["state"] == "dead"
    async with _stream(api, job_id) as events:
        with anyio.fail_after(LIVE_S):
            replayed = [e async for e in events]
    assert replayed == _expected(whole)
    assert replayed[-1][1]["transition"] == "dead"
    last = str(len(whole["events"]))
    async with _stream(api, job_id, {"Last-Event-ID": last}) as events:
        await _ended(events)  # nothing after the last one: the stream ends at once


async def test_unknown_other_scope_and_bad_input_answer_errors(api: Api) -> None:
    job_id = await api.post_text("scoped.txt")
    other = api.server.create_key(f"other-{uuid.uuid4()}", "org")
    cases = [
        (f"/v1/ingest/{uuid.uuid4()}/events", {}, 404, "NOT_FOUND"),
        ("/v1/ingest/not-a-uuid/events", {}, 404, "NOT_FOUND"),
        (f"/v1/ingest/{job_id}/events", {"x-api-key": other}, 404, "NOT_FOUND"),
        (f"/v1/ingest/{job_id}/events", {"x-api-key": "nope"}, 401, "UNAUTHENTICATED"),
        (f"/v1/ingest/{job_id}/events", {"Last-Event-ID": "abc"}, 400, "INVALID_REQUEST"),
        (f"/v1/ingest/{job_id}/events", {"Last-Event-ID": "-1"}, 400, "INVALID_REQUEST"),
    ]
    for url, headers, status, code in cases:
        resp = await api.http.get(url, headers=headers)
        assert resp.status_code == status, (url, headers, resp.text)
        assert resp.json()["error"]["code"] == code
        if status == 400:
            assert "Last-Event-ID" in resp.json()["error"]["message"]
    resp = await api.http.post(f"/v1/ingest/{job_id}/events")
    assert resp.status_code == 405


def _requests(samples: Any, route: str, status: str = "200") -> float:
    return value(samples, "telha_http_requests_total", method="GET", route=route, status=status)


async def test_wait_follows_the_stream_and_returns_the_final_job(api: Api) -> None:
    job_id = await api.post_text("wait.txt")
    seen: list[JobEventOut] = []
    before = await scrape(api.server.base_url)
    async with (
        api.worker() as worker,
        AsyncTelha(api.server.base_url, api.key) as telha,
        anyio.create_task_group() as tg,
    ):

        async def wait() -> None:
            done = await telha.wait(job_id, timeout=30, on_event=seen.append)
            assert done.state == "completed" and done.job_id == job_id
            assert [e.transition for e in done.events] == [e.transition for e in seen]

        tg.start_soon(wait)
        job = await worker.next_job(["text"])
        await worker.fail(job, "transient: once more")
        job = await worker.next_job(["text"])
        assert (await worker.submit(job, SUBMISSION)).accepted
    assert [e.transition for e in seen] == ["enqueued", "leased", "retried", "leased", "completed"]
    after = await scrape(api.server.base_url)
    assert _requests(after, EVENTS_ROUTE) - _requests(before, EVENTS_ROUTE) == 1
    # One read of the final job, no polling (other tests of the module run before or after).
    assert _requests(after, JOB_ROUTE) - _requests(before, JOB_ROUTE) == 1


async def test_wait_polls_when_asked_to(api: Api) -> None:
    job_id = await api.post_text("polled.txt")
    before = await scrape(api.server.base_url)
    async with api.worker() as worker, AsyncTelha(api.server.base_url, api.key) as telha:
        job = await worker.next_job(["text"])
        assert (await worker.submit(job, SUBMISSION)).accepted
        done = await telha.wait(job_id, timeout=30, stream=False)
    assert done.state == "completed"
    after = await scrape(api.server.base_url)
    assert _requests(after, EVENTS_ROUTE) == _requests(before, EVENTS_ROUTE)


async def _forward(request: Any) -> Any:
    """The older server: every route of the real one but the events route (404, as a
    server without it answers)."""
    from starlette.responses import JSONResponse, Response

    if request.url.path.endswith("/events"):
        body = {"error": {"code": "NOT_FOUND", "message": "Not Found"}}
        return JSONResponse(body, status_code=404)
    upstream: httpx.AsyncClient = request.app.state.upstream
    resp = await upstream.request(
        request.method,
        request.url.path,
        params=request.query_params,
        headers={"x-api-key": request.headers.get("x-api-key", "")},
        content=await request.body(),
    )
    return Response(resp.content, resp.status_code, media_type=resp.headers.get("content-type"))


@asynccontextmanager
async def _older_server(upstream_url: str) -> AsyncIterator[str]:
    """A real HTTP server on 127.0.0.1 (hypercorn) in front of ``upstream_url`` that has no
    events route; yields its base URL."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config
    from starlette.applications import Starlette
    from starlette.routing import Route

    from telha.sockets import bind_tcp

    app = Starlette(routes=[Route("/{path:path}", _forward, methods=["GET", "POST"])])
    sock = bind_tcp("127.0.0.1:0")
    port = sock.getsockname()[1]
    cfg = Config()
    cfg.bind = [f"fd://{sock.detach()}"]
    cfg.accesslog = None
    stop = anyio.Event()
    async with httpx.AsyncClient(base_url=upstream_url, timeout=30) as upstream:
        app.state.upstream = upstream
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve(app, cfg, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
            yield f"http://127.0.0.1:{port}"
            stop.set()


async def test_wait_falls_back_to_polling_against_a_server_without_the_route(api: Api) -> None:
    job_id = await api.post_text("older.txt")
    seen: list[str] = []
    async with (
        _older_server(api.server.base_url) as older,
        api.worker() as worker,
        AsyncTelha(older, api.key) as telha,
    ):
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                done = await telha.wait(
                    job_id, timeout=30, on_event=lambda e: seen.append(e.transition)
                )
                assert done.state == "completed"

            tg.start_soon(wait)
            job = await worker.next_job(["text"])
            assert (await worker.submit(job, SUBMISSION)).accepted
        with pytest.raises(NotFound):  # polling tells "no such job" apart
            await telha.wait(str(uuid.uuid4()), timeout=10)
    assert seen == ["enqueued", "leased", "completed"]


async def test_shutdown_ends_open_streams_at_once(engine: str, tmp_path: Path) -> None:
    """An open stream does not hold up the drain: SIGTERM ends it and the process exits 0
    well within ``server.shutdown_grace_s``."""
    config = write_config(
        tmp_path, engine, workers={"in_process": []}, server={"shutdown_grace_s": 30}
    )
    with ServerProcess(config) as server:
        key = server.create_key("shutdown", "org")
        async with httpx.AsyncClient(
            base_url=server.base_url, headers={"x-api-key": key}, timeout=30
        ) as http:
            body = {"format": "text", "name": "open.txt", "content": "never leased"}
            job_id = (await http.post("/v1/ingest", json=body)).json()["jobId"]
            api = Api(server, Scope("shutdown", "org"), key, http)
            async with _stream(api, job_id) as events:
                assert (await _next(events))[0] == 1
                started = time.monotonic()
                assert server.proc is not None
                server.proc.send_signal(signal.SIGTERM)
                await _ended(events)
                code = await anyio.to_thread.run_sync(server.proc.wait, 20)
        assert code == 0, server.log_text()
        assert time.monotonic() - started < 5
