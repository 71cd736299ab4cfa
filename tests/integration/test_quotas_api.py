"""Quotas and rate limits per scope against a real ``telha serve`` on each engine
(docs/operations.md, "Quotas and rate limits"; docs/rest-api.md, "Usage"): with nothing set a
scope is unlimited; ``telha scope set`` limits one scope (others unaffected):
``max_pending_jobs`` answers ``429 QUOTA_EXCEEDED`` with ``Retry-After`` at ingest,
``max_stored_bytes`` answers ``429 QUOTA_EXCEEDED`` without it once over, and
``requests_per_second``/``burst`` answer ``429 RATE_LIMITED`` with ``Retry-After``;
``GET /v1/usage`` shows the caller's own scope; ``/metrics`` has aggregate gauges and no scope;
the client waits out ``Retry-After`` and the CLI shows the refusal; bad ``scope set`` input is
refused naming the key."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest

from telha.client import AsyncTelha, QuotaExceeded, RateLimited
from tests.support.inproc import InProcessServer
from tests.support.server import child_environ, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    folder = tmp_path_factory.mktemp("quotas")
    # No in-process workers: jobs stay pending.
    with InProcessServer(write_config(folder, engine, workers={"in_process": []})) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


def _cli(server: InProcessServer, *args: str, key: str = "") -> subprocess.CompletedProcess[str]:
    env = {**child_environ(), "TELHA_API_KEY": key, "TELHA_URL": server.base_url}
    return subprocess.run(
        [sys.executable, "-m", "telha", *args], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )  # fmt: skip


def _limit(server: InProcessServer, tenant: str, key: str, value: str) -> None:
    done = _cli(
        server, "scope", "set", "--tenant", tenant, "--org", "org", key, value,
        "--config", str(server.config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert key in done.stdout


class Scoped:
    """A fresh scope with its key and an HTTP client (limits are set before its first
    request, so the server has none of its limits cached)."""

    def __init__(self, server: InProcessServer, **limits: str) -> None:
        self.tenant = f"q-{uuid.uuid4()}"
        for key, value in limits.items():
            _limit(server, self.tenant, key, value)
        self.key = server.create_key(self.tenant, "org")
        self.http = httpx.AsyncClient(
            base_url=server.base_url, headers={"x-api-key": self.key}, timeout=60
        )

    async def post(self, fmt: str, name: str, content: str) -> httpx.Response:
        return await self.http.post(
            "/v1/ingest", json={"format": fmt, "name": name, "content": content}
        )

    async def usage(self) -> dict[str, object]:
        resp = await self.http.get("/v1/usage")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())


@pytest.fixture
async def plain(server: InProcessServer) -> AsyncIterator[Scoped]:
    s = Scoped(server)
    async with s.http:
        yield s


async def test_usage_of_an_unlimited_scope(server: InProcessServer, plain: Scoped) -> None:
    assert await plain.usage() == {
        "pendingJobs": 0,
        "storedBytes": 0,
        "ingestsInProgress": 0,
        "eventStreams": 0,
        "limits": {
            "maxPendingJobs": None,
            "maxStoredBytes": None,
            "requestsPerSecond": None,
            "burst": None,
            # Half of ingest.max_concurrent (16) and of server.max_event_streams (1000).
            "maxConcurrentIngests": 8,
            "maxEventStreams": 500,
        },
    }
    for i in range(3):
        assert (await plain.post("text", f"d{i}.txt", f"text {i} " * 20)).status_code == 202
    resp = await plain.post("json", "r.json", '{"name": "' + "x" * 300 + '"}')
    assert resp.status_code == 201, resp.text
    usage = await plain.usage()
    assert usage["pendingJobs"] == 3
    assert isinstance(usage["storedBytes"], int) and usage["storedBytes"] >= 300
    # Another scope sees only its own usage; no key, no usage.
    other = Scoped(server)
    async with other.http:
        assert (await other.usage())["pendingJobs"] == 0
    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        resp = await anon.get("/v1/usage")
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "UNAUTHENTICATED"


async def test_max_pending_jobs(server: InProcessServer) -> None:
    s = Scoped(server, max_pending_jobs="2")
    async with s.http:
        for i in range(2):
            assert (await s.post("text", f"p{i}.txt", f"pending {i}")).status_code == 202
        resp = await s.post("text", "p2.txt", "pending 2")
        assert resp.status_code == 429, resp.text
        assert resp.json()["error"]["code"] == "QUOTA_EXCEEDED"
        assert "max_pending_jobs" in resp.json()["error"]["message"]
        assert resp.headers["retry-after"] == "1"
        # No job was written, and a request that makes no job is still served.
        assert (await s.post("json", "j.json", '{"a": 1}')).status_code == 201
        usage = await s.usage()
        assert usage["pendingJobs"] == 2
        assert usage["limits"] == {
            "maxPendingJobs": 2,
            "maxStoredBytes": None,
            "requestsPerSecond": None,
            "burst": None,
            "maxConcurrentIngests": 8,
            "maxEventStreams": 500,
        }
    # Other scopes are not limited.
    other = Scoped(server)
    async with other.http:
        for i in range(3):
            assert (await other.post("text", f"o{i}.txt", f"other {i}")).status_code == 202


def _refusals(text: str) -> float:
    """``telha_quota_refusals_total{code="QUOTA_EXCEEDED"}`` in a ``/metrics`` page."""
    for line in text.splitlines():
        if line.startswith('telha_quota_refusals_total{code="QUOTA_EXCEEDED"}'):
            return float(line.split()[-1])
    return 0.0


async def test_max_pending_jobs_holds_under_concurrent_ingests(server: InProcessServer) -> None:
    """The enqueue counts the scope's pending jobs in its own transaction, under the scope's
    quota lock: requests that all pass the early check together cannot all be enqueued. The
    scope may hold every ingest slot (``max_concurrent_ingests`` 0), so all 12 reach it."""
    s = Scoped(server, max_pending_jobs="3", max_concurrent_ingests="0")
    async with s.http:
        before = _refusals((await s.http.get("/metrics")).text)
        codes: list[int] = []

        async def post(i: int) -> None:
            resp = await s.post("text", f"c{i}.txt", f"concurrent {i}")
            codes.append(resp.status_code)
            if resp.status_code == 429:
                assert resp.json()["error"]["code"] == "QUOTA_EXCEEDED", resp.text

        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(post, i)
        assert sorted(codes) == [202] * 3 + [429] * 9
        assert (await s.usage())["pendingJobs"] == 3
        assert _refusals((await s.http.get("/metrics")).text) - before == 9


async def test_max_stored_bytes_and_the_cli_shows_it(server: InProcessServer) -> None:
    s = Scoped(server, max_stored_bytes="300")
    async with s.http:
        big = '{"name": "' + "y" * 400 + '"}'
        assert (await s.post("json", "big.json", big)).status_code == 201  # crosses it
        usage = await s.usage()
        assert isinstance(usage["storedBytes"], int) and usage["storedBytes"] > 300
        resp = await s.post("json", "more.json", '{"a": 2}')
        assert resp.status_code == 429, resp.text
        assert resp.json()["error"]["code"] == "QUOTA_EXCEEDED"
        assert "max_stored_bytes" in resp.json()["error"]["message"]
        assert "retry-after" not in resp.headers  # waiting frees no bytes
        assert (await s.post("text", "t.txt", "text")).status_code == 429
        assert (await s.http.get("/v1/sources")).status_code == 200  # reads still work
    # The client raises at once (nothing to wait for); the CLI prints the code.
    async with AsyncTelha(server.base_url, s.key) as client:
        started = time.monotonic()
        with pytest.raises(QuotaExceeded) as caught:
            await client.ingest("json", "c.json", content='{"b": 3}')
        assert caught.value.retry_after_s is None and time.monotonic() - started < 5
    path = server.config.parent / "cli-note.txt"
    path.write_text("a note\n", encoding="utf-8")
    done = _cli(server, "ingest", "--format", "text", str(path), key=s.key)
    assert done.returncode != 0
    assert "QUOTA_EXCEEDED" in done.stdout + done.stderr


async def test_rate_limit_and_the_client_waits(server: InProcessServer) -> None:
    s = Scoped(server, requests_per_second="1", burst="2")
    async with s.http:
        assert (await s.http.get("/v1/usage")).status_code == 200
        assert (await s.http.get("/v1/sources")).status_code == 200
        resp = await s.http.get("/v1/usage")
        assert resp.status_code == 429, resp.text
        assert resp.json()["error"]["code"] == "RATE_LIMITED"
        assert resp.headers["retry-after"] == "1"
        # Another scope's key has its own bucket (and no limit).
        other = Scoped(server)
        async with other.http:
            for _ in range(5):
                assert (await other.http.get("/v1/usage")).status_code == 200
    # The client waits out Retry-After and gets its answers.
    async with AsyncTelha(server.base_url, s.key) as client:
        started = time.monotonic()
        for _ in range(3):
            usage = await client.usage()
            assert usage.limits.requests_per_second == 1.0 and usage.limits.burst == 2
        assert time.monotonic() - started >= 0.9
    # With no retries left, the client raises it, with the wait.
    async with AsyncTelha(server.base_url, s.key, retries=0) as client:
        with pytest.raises(RateLimited) as caught:
            for _ in range(5):
                await client.usage()
        assert caught.value.retry_after_s == 1.0


async def test_metrics_are_aggregate(server: InProcessServer) -> None:
    s = Scoped(server, requests_per_second="0.5", burst="1")
    async with s.http:
        await s.post("json", "m.json", '{"m": 1}')
        assert (await s.http.get("/v1/usage")).status_code == 429
    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        text = (await anon.get("/metrics")).text
    assert 'telha_quota_refusals_total{code="RATE_LIMITED"}' in text
    stored = [ln for ln in text.splitlines() if ln.startswith("telha_stored_bytes ")]
    assert stored and float(stored[0].split()[1]) > 0
    assert s.tenant not in text


def test_scope_set_refuses_bad_input(server: InProcessServer) -> None:
    conf = ("--config", str(server.config))
    base = ("scope", "set", "--tenant", "cli-bad", "--org", "org")
    done = _cli(server, *base, "max_things", "3", *conf)
    assert done.returncode == 2 and "max_things" in done.stderr
    for key, value in (("max_pending_jobs", "-1"), ("max_pending_jobs", "1.5"), ("burst", "x")):
        done = _cli(server, *base, key, value, *conf)
        assert done.returncode == 2 and key in done.stderr, (key, value, done.stderr)
    done = _cli(server, *base, "requests_per_second", "nan", *conf)
    assert done.returncode == 2 and "requests_per_second" in done.stderr
    done = _cli(server, "scope", "set", "--tenant", " ", "--org", "org", "burst", "1", *conf)
    assert done.returncode == 2
    # Set, show, back to the default.
    _limit(server, "cli-bad", "requests_per_second", "2.5")
    shown = _cli(server, "scope", "show", "--tenant", "cli-bad", "--org", "org", *conf)
    assert shown.returncode == 0, shown.stderr
    assert "requests_per_second\t2.5\tscope" in shown.stdout
    assert "max_pending_jobs\t0\tdefault" in shown.stdout
    _limit(server, "cli-bad", "requests_per_second", "default")
    shown = _cli(server, "scope", "show", "--tenant", "cli-bad", "--org", "org", *conf)
    assert "requests_per_second\t0\tdefault" in shown.stdout
    # The slot shares: half the global limits unless set; 0 is every slot.
    assert "max_concurrent_ingests\t8\tdefault" in shown.stdout
    assert "max_event_streams\t500\tdefault" in shown.stdout
    _limit(server, "cli-bad", "max_event_streams", "0")
    shown = _cli(server, "scope", "show", "--tenant", "cli-bad", "--org", "org", *conf)
    assert "max_event_streams\t0\tscope" in shown.stdout
    done = _cli(server, *base, "max_concurrent_ingests", "2.5", *conf)
    assert done.returncode == 2 and "max_concurrent_ingests" in done.stderr
