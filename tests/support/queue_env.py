"""Shared pieces of the queue and streaming tests: a fresh scope per test (REST client, key,
scoped worker token), a scripted worker holding that token, submission helpers."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from telha.domain.model import Scope
from tests.support.inproc import InProcessServer, Server
from tests.support.server import ServerProcess, write_config
from tests.support.worker import ScriptedWorker, scripted_worker

__all__ = ["Tenant", "queue_server", "text_submission", "transitions"]


def queue_server(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    lease_s: float,
    engine: str = "sqlite",
    *,
    in_process: bool = False,
    **jobs: object,
) -> Server:
    """A server on ``engine`` with no in-process workers (the test is the worker), short
    leases, a fast reaper and tiny backoff; ``in_process``: an :class:`InProcessServer`, else
    a ``telha serve`` subprocess."""
    folder = tmp_path_factory.mktemp(name)
    settings = {
        "lease_secs": lease_s,
        "reap_interval_s": 0.1,
        "backoff_base_ms": 10,
        "backoff_max_s": 0.05,
        **jobs,
    }
    config = write_config(folder, engine, workers={"in_process": []}, jobs=settings)
    return (InProcessServer if in_process else ServerProcess)(config).start()


class Tenant:
    """A fresh scope: REST client with its key, and a scoped worker token."""

    def __init__(self, server: Server, client: httpx.AsyncClient, scope: Scope) -> None:
        self.server, self.client, self.scope = server, client, scope
        self.token = server.worker_token(scope)

    async def post(self, fmt: str, name: str, content: str | bytes) -> dict[str, object]:
        field = (
            {"content": content}
            if isinstance(content, str)
            else {"contentBase64": base64.b64encode(content).decode()}
        )
        resp = await self.client.post("/v1/ingest", json={"format": fmt, "name": name, **field})
        assert resp.status_code in (200, 202), resp.text
        return dict(resp.json())

    async def job(self, job_id: object) -> dict[str, object]:
        resp = await self.client.get(f"/v1/ingest/{job_id}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())


@pytest.fixture
async def tenant(queue_srv: Server) -> AsyncIterator[Tenant]:
    scope = Scope(f"t-{uuid.uuid4()}", "org")
    key = queue_srv.create_key(scope.tenant_id, scope.organization_id)
    async with httpx.AsyncClient(
        base_url=queue_srv.base_url, headers={"x-api-key": key}, timeout=30
    ) as c:
        yield Tenant(queue_srv, c, scope)


@pytest.fixture
async def worker(tenant: Tenant) -> AsyncIterator[ScriptedWorker]:
    async with scripted_worker(tenant.server.grpc_addr, tenant.token) as w:
        yield w


def text_submission(text: str, **node: object) -> dict[str, object]:
    data = text.encode()
    return {
        "v": 1,
        "canonicalText": text,
        "spans": [{"start": 0, "end": len(data), "kind": "body"}],
        "nodes": [{"labels": ["DOC"], "properties": {}, "spanRefs": [0], **node}],
        "relationships": [],
    }


def transitions(job: dict[str, object]) -> list[str]:
    return [e["transition"] for e in job["events"]]  # type: ignore[attr-defined, index]
