"""Shared fixtures: the anyio backend, a session-wide real server, a fresh scope per test."""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.pg import ENGINES, drop_databases, require_engine
from tests.support.server import ServerProcess, write_config

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def _bytecode_outside_the_tree() -> None:
    """Under ``PYTHONDONTWRITEBYTECODE`` every child the suite starts (``python -m telha``
    commands, ``telha serve``, workers, the pools' processes: several hundred a session)
    would compile every module it imports again: about 0.5 s of CPU a server start, 0.15 s
    a CLI command. The session and its children write their bytecode under the temp folder
    instead (``PYTHONPYCACHEPREFIX``), never beside the sources; an explicit prefix wins."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    prefix = str(Path(tempfile.gettempdir()) / f"telha-tests-pycache-{os.getuid()}")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_bytecode_outside_the_tree()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _drop_test_databases() -> Iterator[None]:
    """Drop the PostgreSQL databases the session created, once it ends."""
    yield
    drop_databases()


@pytest.fixture(scope="module", params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """The storage engine a module's servers run on: every module that uses it runs once on
    SQLite and once on PostgreSQL (one database per module server)."""
    return require_engine(str(request.param))


@pytest.fixture(scope="session", params=ENGINES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One ``telha serve`` per engine for the session (tests isolate themselves by scope)."""
    engine = require_engine(str(request.param))
    folder = tmp_path_factory.mktemp(f"server-{engine}")
    config = write_config(
        folder, engine, ingest={"json_max_records": 50, "max_body_bytes": 262_144},
        search={"enabled": True},
        connectors={"allowed_roots": ["/srv", str(tmp_path_factory.getbasetemp())]},
    )  # fmt: skip
    with ServerProcess(config) as proc:
        yield proc
        assert proc.stop() == 0, proc.log_text()


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
