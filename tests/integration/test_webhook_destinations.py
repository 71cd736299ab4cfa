"""Webhook destinations against a real ``telha serve`` on each engine (docs/operations.md,
"Webhooks"): the one destination rule of the web worker and webhooks.

- Every spelling of a destination that cannot be parsed or is refused (loopback, link-local,
  private, IPv4-mapped, an unlisted port) is a ``400 INVALID_REQUEST`` naming
  ``options.webhook.url`` at request time, and ``telha webhook add`` exits 2 with the
  message; an allow-list entry ``127.0.0.1:<port>`` admits that port only.
- A host name is checked again, resolved, when the delivery connects: ``localhost`` listed
  by name resolves to loopback, is refused, and no connection is ever made (a listening
  socket's backlog stays empty); the delivery ends ``failed`` with its reason.
- Deliveries an older version stored with such URLs (raw rows in a real store) are failed on
  their first claim, not retried, and never stop the deliverer: the server stays up and the
  next good delivery arrives; ``telha check`` stays clean.
- A URL's credentials and query values never reach the log.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import httpx
import pytest

from telha.config import load_config
from tests.support.receiver import Receiver
from tests.support.server import ServerProcess, telha_check, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

WORKERS = {"in_process": ["text_worker"], "concurrency": 1}
FAST = {"backoff_base_ms": 100, "backoff_max_s": 0.5, "poll_interval_ms": 50}
FAST |= {"timeout_s": 2, "claim_s": 5}

#: The issue's spellings and their kin: none may be accepted with the default rules.
UNPARSABLE = [
    "http://256.0.0.1/",
    "http://xn--zz/",
    "http://ｅｘａｍｐｌｅ\u3000.com/",
    "http://1.2.3.4.5/",
    "http://[::1/",
    "http://127.0.0.1:99999/",
]
REFUSED = [
    "http://0177.0.0.1:9/x",
    "http://127.0.0.1:9/",
    "http://2130706433/",
    "http://[::ffff:127.0.0.1]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://１２７．０．０．１/",
    "http://10.1.2.3/",
    "http://[::1]:9/",
]


class Site:
    """A server whose ``[webhooks] allowed_hosts`` lists its receiver as ``127.0.0.1:<port>``
    and ``localhost:<trap port>`` (a name entry: a private address it resolves to stays
    refused), the trap being a listening socket nothing may connect to."""

    def __init__(self, folder: Path, engine: str) -> None:
        self.receiver = Receiver()
        self.trap = socket.socket()
        self.trap.bind(("127.0.0.1", 0))
        self.trap.listen(8)
        self.trap_port = self.trap.getsockname()[1]
        hosts = [f"127.0.0.1:{self.receiver.port}", f"localhost:{self.trap_port}"]
        self.config = write_config(
            folder, engine, workers=WORKERS, webhooks={"allowed_hosts": hosts, **FAST}
        )
        self.server = ServerProcess(self.config)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "telha", *args, "--config", str(self.config)],
            capture_output=True,
            text=True,
            check=False,
        )

    def trap_connections(self) -> int:
        """Connections made to the trap (completed handshakes wait in its backlog)."""
        self.trap.setblocking(False)
        n = 0
        while True:
            try:
                conn, _ = self.trap.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1


@pytest.fixture(scope="module")
def site(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    s = Site(tmp_path_factory.mktemp("hook-dest"), engine)
    with s.receiver, s.server:
        yield s
        assert s.server.stop() == 0, s.server.log_text()
    s.trap.close()


@pytest.fixture
async def client(site: Site) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    tenant = f"t-{uuid.uuid4()}"
    key = site.server.create_key(tenant, "org")
    done = site.cli("webhook", "secret", "--tenant", tenant, "--org", "org")
    assert done.returncode == 0, done.stderr
    async with httpx.AsyncClient(
        base_url=site.server.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield c, tenant


def _ingest(url: str) -> dict[str, Any]:
    """A new job's body (fresh content: never deduplicated) with ``options.webhook.url``."""
    content = str(uuid.uuid4())
    return {
        "format": "text",
        "name": "a.txt",
        "content": content,
        "options": {"webhook": {"url": url}},
    }


@pytest.mark.parametrize("url", UNPARSABLE + REFUSED)
async def test_request_time_refusal_names_the_field(
    site: Site, client: tuple[httpx.AsyncClient, str], url: str
) -> None:
    c, _ = client
    resp = await c.post("/v1/ingest", json=_ingest(url))
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert error["message"].startswith("options.webhook.url is "), error
    assert site.server.proc is not None and site.server.proc.poll() is None


async def test_listed_port_only(site: Site, client: tuple[httpx.AsyncClient, str]) -> None:
    c, _ = client
    other = f"http://127.0.0.1:{site.receiver.port + 1}/h"
    resp = await c.post("/v1/ingest", json=_ingest(other))
    assert resp.status_code == 400 and "not on [webhooks] allowed_hosts" in resp.text
    # The listed port, spelled as an integer address: normalised, accepted, delivered.
    spelled = f"http://2130706433:{site.receiver.port}/port"
    resp = await c.post("/v1/ingest", json=_ingest(spelled))
    assert resp.status_code == 202, resp.text
    [got] = await site.receiver.wait_for(1, "/port")
    assert got.job_id == resp.json()["jobId"]


def test_cli_refuses_every_spelling_with_exit_2(site: Site) -> None:
    other = f"http://127.0.0.1:{site.receiver.port + 1}/h"
    for url in [*UNPARSABLE[:3], *REFUSED[:5], other]:
        done = site.cli("webhook", "add", "--tenant", "cli", "--org", "org", url)
        assert done.returncode == 2, (url, done.stdout, done.stderr)
        assert "URL is " in done.stderr, done.stderr
    listed = site.cli("webhook", "list", "--tenant", "cli", "--org", "org")
    assert listed.returncode == 0 and listed.stdout == ""


async def test_a_name_resolving_to_loopback_is_refused_when_connecting(
    site: Site, client: tuple[httpx.AsyncClient, str]
) -> None:
    c, _ = client
    url = f"http://localhost:{site.trap_port}/h"  # listed by name: allowed at request time
    resp = await c.post("/v1/ingest", json=_ingest(url))
    assert resp.status_code == 202, resp.text
    job_id = resp.json()["jobId"]
    await wait_job(c, job_id)
    row = await _wait_failed(site.config, job_id)
    assert "loopback" in row[1] and "[webhooks] allowed_hosts" in row[1], row
    assert site.trap_connections() == 0
    # Not retried: failed once, for good.
    await anyio.sleep(1.0)
    assert (await _delivery_rows(site.config, job_id)) == [row]
    # The deliverer went on: a good delivery still arrives.
    good = await c.post("/v1/ingest", json=_ingest(site.receiver.url("/after-trap")))
    assert good.status_code == 202, good.text
    await site.receiver.wait_for(1, "/after-trap")
    assert site.trap_connections() == 0


async def test_poisoned_rows_of_an_older_version_fail_and_the_next_is_delivered(
    engine: str, tmp_path: Path
) -> None:
    with Receiver() as receiver:
        hooks = {"allowed_hosts": [f"127.0.0.1:{receiver.port}"], **FAST}
        config = write_config(tmp_path, engine, workers=WORKERS, webhooks=hooks)
        with ServerProcess(config) as first:
            key = first.create_key("old", "org")
            job_ids = []
            async with httpx.AsyncClient(
                base_url=first.base_url, headers={"x-api-key": key}, timeout=30
            ) as c:
                for name in ("o.txt", "bad-stats.txt"):
                    body = {"format": "text", "name": name, "content": name}
                    job_ids.append((await c.post("/v1/ingest", json=body)).json()["jobId"])
                    await wait_job(c, job_ids[-1])
            _secret(config, "old")
            assert first.stop() == 0, first.log_text()
        job_id, bad_job = job_ids
        # As an older version stored them: URLs today's rules refuse or cannot parse, due
        # first; a good URL whose job's stored stats do not decode (handling it raises);
        # then a good one.
        poisoned = [*UNPARSABLE[:4], "http://0177.0.0.1:9/x", "http://169.254.169.254/"]
        await _insert_deliveries(config, job_id, poisoned, first_at=1_000)
        stats = await _set_stats(config, bad_job, b"{not json")
        await _insert_deliveries(config, bad_job, [receiver.url("/bad-job")], first_at=2_000)
        await _insert_deliveries(config, job_id, [receiver.url("/good")], first_at=3_000)
        with ServerProcess(config) as second:
            [got] = await receiver.wait_for(1, "/good")
            assert got.job_id == job_id
            await anyio.sleep(0.5)
            assert second.proc is not None and second.proc.poll() is None
            assert second.stop() == 0, second.log_text()
            log = second.log_text()
        rows = await _delivery_rows(config, job_id)
        assert sorted(r[0] for r in rows) == sorted(poisoned)  # the good one is gone: sent
        for url, error, state, attempts in rows:
            assert state == "failed" and attempts == 1, (url, error, state, attempts)
            assert error.startswith(("the URL is not valid", "refused: ")), (url, error)
        [(url, error, state, attempts)] = await _delivery_rows(config, bad_job)
        assert (state, attempts) == ("failed", 1) and error.startswith("DecodeError"), error
        assert receiver.deliveries("/bad-job") == []
        assert log.count('"webhook_failed"') == len(poisoned) + 1
        assert "actor_crash" not in log, [ln for ln in log.splitlines() if "actor_crash" in ln]
        await _set_stats(config, bad_job, stats)
        checked = telha_check(config)
        assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_credentials_and_query_values_stay_out_of_the_log(
    engine: str, tmp_path: Path
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    hooks = {"allowed_hosts": [f"127.0.0.1:{closed}"], **FAST}
    config = write_config(tmp_path, engine, workers=WORKERS, webhooks=hooks)
    with ServerProcess(config) as server:
        key = server.create_key("logs", "org")
        _secret(config, "logs")
        url = f"http://user:pw@127.0.0.1:{closed}/h?token=s3cret"
        async with httpx.AsyncClient(
            base_url=server.base_url, headers={"x-api-key": key}, timeout=30
        ) as c:
            resp = await c.post("/v1/ingest", json=_ingest(url))
            assert resp.status_code == 202, resp.text
            await wait_job(c, resp.json()["jobId"])
        await _logged(server, '"webhook_retry"')
        assert server.stop() == 0, server.log_text()
        log = server.log_text()
    assert "s3cret" not in log and "pw@" not in log and ":pw" not in log
    assert f"127.0.0.1:{closed}/h?token=[redacted]" in log


def _secret(config: Path, tenant: str) -> None:
    """``telha webhook secret`` for ``tenant``/``org`` (the real CLI)."""
    cmd = [sys.executable, "-m", "telha", "webhook", "secret", "--tenant", tenant, "--org", "org"]
    subprocess.run([*cmd, "--config", str(config)], check=True, capture_output=True)


async def _logged(server: ServerProcess, needle: str) -> None:
    """Wait (up to 30 s) until ``needle`` is in the server's log."""
    with anyio.fail_after(30):
        while needle not in server.log_text():  # noqa: ASYNC110 (a file, not an event)
            await anyio.sleep(0.05)


# Raw storage access, as an older version (or an operator) would read and write rows.


async def _sql(config: Path, sqlite_sql: str, pg_sql: str, *params: Any) -> list[Any]:
    cfg, base = load_config(config, environ={})
    if cfg.storage.engine == "sqlite":
        with sqlite3.connect(cfg.storage_path(base)) as conn:
            return [tuple(r) for r in conn.execute(sqlite_sql, params).fetchall()]
    conn = await asyncpg.connect(cfg.storage.dsn)
    try:
        return [tuple(r) for r in await conn.fetch(pg_sql, *params)]
    finally:
        await conn.close()


async def _set_stats(config: Path, job_id: str, stats: bytes | None) -> bytes | None:
    """Store ``stats`` as the job's raw stats column; the value it had."""
    raw = uuid.UUID(job_id).bytes
    [(old,)] = await _sql(
        config, "SELECT stats FROM jobs WHERE job_id = ?",
        "SELECT stats FROM jobs WHERE job_id = $1", raw,
    )  # fmt: skip
    await _sql(
        config, "UPDATE jobs SET stats = ? WHERE job_id = ? RETURNING 1",
        "UPDATE jobs SET stats = $1 WHERE job_id = $2 RETURNING 1", stats, raw,
    )  # fmt: skip
    return None if old is None else bytes(old)


async def _insert_deliveries(config: Path, job_id: str, urls: list[str], first_at: int) -> None:
    """Delivery rows of ``job_id`` to ``urls``, due at ``first_at``, ``first_at + 1`` … (µs:
    long due, in this order)."""
    raw = uuid.UUID(job_id).bytes
    [(sid,)] = await _sql(
        config, "SELECT scope_id FROM jobs WHERE job_id = ?",
        "SELECT scope_id FROM jobs WHERE job_id = $1", raw,
    )  # fmt: skip
    for i, url in enumerate(urls):
        # The columns of migration 0010: no state (an older version's row).
        await _sql(
            config,
            "INSERT INTO webhook_deliveries (delivery_id, scope_id, job_id, url, event,"
            " created_at, next_attempt_at) VALUES (?, ?, ?, ?, 'completed', ?, ?) RETURNING 1",
            "INSERT INTO webhook_deliveries (delivery_id, scope_id, job_id, url, event,"
            " created_at, next_attempt_at) VALUES ($1, $2, $3, $4, 'completed', $5, $6)"
            " RETURNING 1",
            uuid.uuid4().bytes, sid, raw, url, time.time_ns() // 1000, first_at + i,
        )  # fmt: skip


async def _delivery_rows(config: Path, job_id: str) -> list[tuple[str, str, str, int]]:
    """``(url, last_error, state, attempts)`` of the job's delivery rows."""
    return await _sql(
        config,
        "SELECT url, last_error, state, attempts FROM webhook_deliveries WHERE job_id = ?",
        "SELECT url, last_error, state, attempts FROM webhook_deliveries WHERE job_id = $1",
        uuid.UUID(job_id).bytes,
    )


async def _wait_failed(config: Path, job_id: str) -> tuple[str, str, str, int]:
    with anyio.fail_after(30):
        while True:
            rows = await _delivery_rows(config, job_id)
            if rows and rows[0][2] == "failed":
                return rows[0]
            await anyio.sleep(0.05)


def test_bare_entries_are_warned_at_start(tmp_path: Path) -> None:
    hooks = {"allowed_hosts": ["127.0.0.1", "hooks.example", "::1", "10.0.0.0/8", "h.example:443"]}
    config = write_config(tmp_path, webhooks=hooks, web={"allowed_hosts": ["127.0.0.1:8000"]})
    with ServerProcess(config) as server:
        assert server.stop() == 0, server.log_text()
    warned = [
        json.loads(line)
        for line in server.log_text().splitlines()
        if '"allowed_hosts_any_port"' in line
    ]
    assert [(w["key"], w["entry"], w["level"]) for w in warned] == [
        ("webhooks.allowed_hosts", "127.0.0.1", "warning"),
        ("webhooks.allowed_hosts", "hooks.example", "warning"),
        ("webhooks.allowed_hosts", "::1", "warning"),
    ]
    assert "'[::1]:<port>'" in warned[2]["detail"] and "every port" in warned[0]["detail"]
