"""Webhooks against the service on each engine, in-process (:mod:`tests.support.inproc`; the
two replicas are ``telha serve`` subprocesses), and a real receiver on 127.0.0.1
(docs/operations.md, "Webhooks"; docs/rest-api.md, ``options.webhook``): a job's JSON is
POSTed when it ends, exactly as ``GET /v1/ingest/{jobId}`` answers it, signed with the
scope's secret (verified with ``standardwebhooks``), for the subscribed events only; a
scope-wide webhook made by ``telha webhook add``; a rotated secret signs later deliveries; a
receiver that fails, then recovers, gets the delivery later (backoff), also across a server
restart; bad ``options.webhook`` values are 400s naming it; two PostgreSQL replicas send each
delivery once."""

from __future__ import annotations

import base64
import copy
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from standardwebhooks.webhooks import WebhookVerificationError

from tests.support.inproc import InProcessServer
from tests.support.pg import create_database, require_engine
from tests.support.receiver import Receiver
from tests.support.server import ServerProcess, child_environ, write_config
from tests.support.wait import wait_job

pytestmark = pytest.mark.anyio

#: Fast retries so a recovered receiver is reached within a test's patience.
WEBHOOKS: dict[str, Any] = {
    "backoff_base_ms": 100,
    "backoff_max_s": 0.5,
    "poll_interval_ms": 50,
    "timeout_s": 2,
    "claim_s": 5,
}
WORKERS = {"in_process": ["text_worker"], "concurrency": 1}
NOT_UTF8 = base64.b64encode(b"\xff\xfe not utf-8").decode()


def hooks_for(receiver: Receiver) -> dict[str, Any]:
    """:data:`WEBHOOKS` with ``allowed_hosts`` listing ``receiver``'s address and port only."""
    return {**WEBHOOKS, "allowed_hosts": [f"127.0.0.1:{receiver.port}"]}


def telha_cli(config: Path, *args: str) -> str:
    """Run ``telha ARGS --config CONFIG`` (the real CLI); its stdout, stripped."""
    out = subprocess.run(
        [sys.executable, "-m", "telha", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        check=True,
        env=child_environ(),
    )
    return out.stdout.strip()


class Scoped:
    """A fresh scope on a server: its API key, client and signing secret (if made)."""

    def __init__(self, server: InProcessServer, client: httpx.AsyncClient, tenant: str) -> None:
        self.server, self.client, self.tenant = server, client, tenant
        self.secret = ""

    def cli(self, *args: str) -> str:
        return telha_cli(self.server.config, *args, "--tenant", self.tenant, "--org", "org")

    def make_secret(self) -> str:
        self.secret = self.cli("webhook", "secret")
        return self.secret

    async def post(self, name: str, content: str | None, webhook: Any = None, **extra: Any) -> str:
        """POST a text job (``content``, or with ``content=None`` the ``extra`` fields)."""
        body: dict[str, Any] = {"format": "text", "name": name, **extra}
        if content is not None:
            body["content"] = content
        if webhook is not None:
            body["options"] = {"webhook": webhook}
        resp = await self.client.post("/v1/ingest", json=body)
        assert resp.status_code == 202, resp.text
        return str(resp.json()["jobId"])

    async def status(self, job_id: str) -> Any:
        resp = await self.client.get(f"/v1/ingest/{job_id}")
        assert resp.status_code == 200, resp.text
        return resp.json()


@pytest.fixture(scope="module")
def receiver(engine: str) -> Iterator[Receiver]:
    """One receiver per module server (its port is the server's only allowed destination);
    each test posts to its own paths."""
    with Receiver() as r:
        yield r


@pytest.fixture(scope="module")
def server(
    engine: str, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    config = write_config(
        tmp_path_factory.mktemp("webhooks"), engine, workers=WORKERS, webhooks=hooks_for(receiver)
    )
    with InProcessServer(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture(scope="module")
def with_secret(server: InProcessServer) -> str:
    """An API key of a scope whose signing secret ``telha webhook secret`` made (one for the
    module's bad-options cases: they change nothing in it)."""
    tenant = f"t-{uuid.uuid4()}"
    telha_cli(server.config, "webhook", "secret", "--tenant", tenant, "--org", "org")
    return server.create_key(tenant, "org")


@pytest.fixture
async def scoped(server: InProcessServer) -> AsyncIterator[Scoped]:
    tenant = f"t-{uuid.uuid4()}"
    key = server.create_key(tenant, "org")
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield Scoped(server, c, tenant)


async def test_per_request_webhook_on_completed_and_dead(
    scoped: Scoped, receiver: Receiver
) -> None:
    secret = scoped.make_secret()
    assert secret.startswith("whsec_")
    done = await scoped.post("ok.txt", "hello", {"url": receiver.url("/done")})
    dead = await scoped.post(
        "bad.txt", None, {"url": receiver.url("/dead")}, contentBase64=NOT_UTF8
    )
    # Subscribed to dead only: a completed job sends nothing.
    quiet = await scoped.post("quiet.txt", "quiet", {"url": receiver.url("/q"), "events": ["dead"]})
    # Subscribed to completed only: a dead job sends nothing.
    quiet_dead = await scoped.post(
        "quiet-bad.txt", None, {"url": receiver.url("/q"), "events": ["completed"]},
        contentBase64=NOT_UTF8,
    )  # fmt: skip
    for job_id, state in ((done, "completed"), (dead, "dead")):
        [delivery] = await receiver.wait_for(1, "/done" if state == "completed" else "/dead")
        body = Receiver.verified(delivery, secret)
        assert body["jobId"] == job_id and body["state"] == state
        # Exactly the JSON GET /v1/ingest/{id} answers.
        assert body == await scoped.status(job_id)
        assert delivery.headers["webhook-id"] and delivery.headers["webhook-timestamp"].isdigit()
        with pytest.raises(WebhookVerificationError):
            Receiver.verified(delivery, "whsec_" + base64.b64encode(b"x" * 32).decode())
    assert (await wait_job(scoped.client, quiet))["state"] == "completed"
    assert (await wait_job(scoped.client, quiet_dead))["state"] == "dead"
    # A later delivery arrives after the quiet jobs ended: theirs would have arrived first.
    await scoped.post("marker.txt", "marker", {"url": receiver.url("/marker")})
    await receiver.wait_for(1, "/marker")
    assert receiver.deliveries("/q") == []
    assert len(receiver.deliveries("/done")) == len(receiver.deliveries("/dead")) == 1


async def test_scope_wide_webhook_and_secret_rotation(scoped: Scoped, receiver: Receiver) -> None:
    first = scoped.cli("webhook", "add", receiver.url("/scope"))
    assert first.startswith("whsec_")  # the scope's first add made the secret
    assert scoped.cli("webhook", "add", "--events", "dead", receiver.url("/scope-dead")) == ""
    listed = scoped.cli("webhook", "list").splitlines()
    assert [line.split("\t")[1:] for line in listed] == [
        ["all", receiver.url("/scope")],
        ["dead", receiver.url("/scope-dead")],
    ]
    one = await scoped.post("one.txt", "one")  # no options.webhook: the scope's webhooks
    [d1] = await receiver.wait_for(1, "/scope")
    assert Receiver.verified(d1, first)["jobId"] == one
    rotated = scoped.make_secret()
    assert rotated != first and rotated.startswith("whsec_")
    # A per-request webhook in the same scope is signed with the same (new) secret.
    two = await scoped.post("two.txt", "two", {"url": receiver.url("/own")})
    got = await receiver.wait_for(2, "/scope")
    [own] = await receiver.wait_for(1, "/own")
    for delivery in (got[1], own):
        assert Receiver.verified(delivery, rotated)["jobId"] == two
        with pytest.raises(WebhookVerificationError):
            Receiver.verified(delivery, first)
    assert receiver.deliveries("/scope-dead") == []
    # Removing a webhook stops its deliveries.
    scoped.cli("webhook", "remove", listed[0].split("\t")[0])
    assert len(scoped.cli("webhook", "list").splitlines()) == 1
    await scoped.post("three.txt", "three", {"url": receiver.url("/own")})
    await receiver.wait_for(2, "/own")
    assert len(receiver.deliveries("/scope")) == 2


async def test_a_failing_receiver_gets_the_delivery_later(
    scoped: Scoped, receiver: Receiver
) -> None:
    secret = scoped.make_secret()
    receiver.status = 503
    try:
        job_id = await scoped.post("retry.txt", "retry", {"url": receiver.url("/r")})
        failed = await receiver.wait_for(3, "/r")  # three failed attempts, backing off
    finally:
        receiver.status = 200
    got = await receiver.wait_for(len(failed) + 1, "/r")
    # Every attempt is the same delivery (one webhook-id) with the same body.
    assert {d.headers["webhook-id"] for d in got} == {got[0].headers["webhook-id"]}
    assert Receiver.verified(got[-1], secret)["jobId"] == job_id
    metrics = (await scoped.client.get("/metrics")).text
    assert 'telha_webhook_deliveries_total{outcome="failed"}' in metrics
    assert "telha_webhook_oldest_undelivered_seconds" in metrics


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"format": "json", "content": '{"a": 1}', "options": {"webhook": {"url": "U"}}}, "json"),
        ({"options": {"webhook": {"url": "ftp://127.0.0.1/x"}}}, "http or https"),
        ({"options": {"webhook": {"url": "http://127.0.0.2/x"}}}, "allowed_hosts"),
        ({"options": {"webhook": {"url": "http://127.0.0.1:1/x"}}}, "allowed_hosts"),
        ({"options": {"webhook": {"url": "U", "events": ["finished"]}}}, "unknown event"),
        ({"options": {"webhook": {"url": "U", "events": []}}}, "at least one"),
        ({"options": {"webhook": {"url": "U", "secret": "x"}}}, "unknown key"),
        ({"options": {"webhook": "U"}}, "must be an object"),
    ],
)
async def test_bad_webhook_options_are_400(
    server: InProcessServer, with_secret: str, receiver: Receiver, body: dict[str, Any], needle: str
) -> None:
    body = copy.deepcopy(body)  # the parameter is shared by both engines' runs
    hook = body["options"]["webhook"]
    if isinstance(hook, dict) and hook.get("url") == "U":
        hook["url"] = receiver.url()
    full = {"format": "text", "name": "x.txt", "content": "x", **body}
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": with_secret}, timeout=30
    ) as client:
        resp = await client.post("/v1/ingest", json=full)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "INVALID_REQUEST" and "options.webhook" in error["message"]
    assert needle in error["message"]


async def test_a_webhook_needs_the_scopes_secret(scoped: Scoped, receiver: Receiver) -> None:
    body = {"format": "text", "name": "s.txt", "content": "s"}
    resp = await scoped.client.post(
        "/v1/ingest", json={**body, "options": {"webhook": {"url": receiver.url()}}}
    )
    assert resp.status_code == 400 and "secret" in resp.json()["error"]["message"]


async def test_cli_refuses_a_disallowed_url(scoped: Scoped) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        scoped.cli("webhook", "add", "http://127.0.0.2/hook")
    assert "allowed_hosts" in failed.value.stderr


async def test_delivery_survives_a_restart(engine: str, tmp_path: Path) -> None:
    with Receiver(status=500) as receiver:
        config = write_config(tmp_path, engine, workers=WORKERS, webhooks=hooks_for(receiver))
        with InProcessServer(config) as first:
            key = first.create_key("restart", "org")
            secret = telha_cli(config, "webhook", "secret", "--tenant", "restart", "--org", "org")
            async with httpx.AsyncClient(
                base_url=first.base_url, headers={"x-api-key": key}, timeout=30
            ) as c:
                resp = await c.post(
                    "/v1/ingest",
                    json={"format": "text", "name": "r.txt", "content": "r",
                          "options": {"webhook": {"url": receiver.url()}}},
                )  # fmt: skip
                job_id = resp.json()["jobId"]
                await receiver.wait_for(1)  # ended and attempted: the delivery row exists
            assert first.stop() == 0, first.log_text()
        receiver.status = 200
        with InProcessServer(config) as second:
            got = await receiver.wait_for(2)
            assert Receiver.verified(got[-1], secret)["jobId"] == job_id
            assert second.stop() == 0, second.log_text()


async def test_two_replicas_send_each_delivery_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    require_engine("postgres")  # several replicas share a database; SQLite is one process
    dsn = create_database()
    servers = []
    listening = Receiver()  # bound now: the servers' allowed_hosts list its port
    for name in ("a", "b"):
        config = write_config(
            tmp_path_factory.mktemp(f"hook-replica-{name}"), "postgres",
            storage={"dsn": dsn, "pool_size": 4}, workers=WORKERS, webhooks=hooks_for(listening),
        )  # fmt: skip
        servers.append(ServerProcess(config))
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(ServerProcess.start, servers))
    try:
        with listening as receiver:
            a, b = servers
            key = a.create_key("replicas", "org")
            telha_cli(a.config, "webhook", "add", "--tenant", "replicas", "--org", "org",
                      receiver.url())  # fmt: skip
            n = 40
            job_ids = []
            for i in range(n):
                base = (a if i % 2 else b).base_url
                async with httpx.AsyncClient(
                    base_url=base, headers={"x-api-key": key}, timeout=30
                ) as c:
                    resp = await c.post(
                        "/v1/ingest", json={"format": "text", "name": f"{i}.txt", "content": str(i)}
                    )
                    job_ids.append(resp.json()["jobId"])
            got = await receiver.wait_for(n, timeout_s=60)
            await anyio.sleep(1.0)  # a second send of an attempt would have arrived by now
            ids = Counter(d.headers["webhook-id"] for d in receiver.deliveries())
            assert all(count == 1 for count in ids.values()), ids.most_common(3)
            assert sorted(d.job_id for d in got) == sorted(job_ids)
    finally:
        for s in servers:
            assert s.stop() == 0, s.log_text()
