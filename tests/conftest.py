"""Shared fixtures: the anyio backend, a session-wide real server, a fresh scope per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess, write_config

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One ``telha serve`` for the session (tests isolate themselves by scope)."""
    folder = tmp_path_factory.mktemp("server")
    proc = ServerProcess(
        write_config(folder, ingest={"json_max_records": 50, "max_body_bytes": 262_144})
    )
    proc.start()
    yield proc
    code = proc.stop()
    assert code == 0, proc.log_text()


@pytest.fixture
def scope_key(server: ServerProcess) -> str:
    """An API key of a scope no other test uses."""
    return server.create_key(f"tenant-{uuid.uuid4()}", "org")


@pytest.fixture
async def client(server: ServerProcess, scope_key: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": scope_key}, timeout=30
    ) as c:
        yield c
