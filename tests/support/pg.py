"""A real PostgreSQL for the tests: the cluster of ``scripts/pg-test-server`` (or the one
``TELHA_TEST_PG_DSN`` names), one fresh database per test module or per server a test
starts, dropped at the end of the session.

``TELHA_TEST_PG=0`` turns the PostgreSQL variants off (they are skipped with a loud reason);
otherwise PostgreSQL is expected, and a cluster that cannot be started fails the tests.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg
import pytest

__all__ = [
    "ENGINES",
    "admin_dsn",
    "create_database",
    "drop_databases",
    "pg_disabled_reason",
    "require_engine",
]

#: The storage engines the ServerProcess-based suites run against.
ENGINES = ("sqlite", "postgres")

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg-test-server"
_created: list[str] = []
_admin: list[str] = []


def pg_disabled_reason() -> str | None:
    """Why the PostgreSQL variants are skipped, or ``None`` when they run."""
    if os.environ.get("TELHA_TEST_PG") == "0":
        return (
            "!!! PostgreSQL tests SKIPPED: TELHA_TEST_PG=0. The postgres engine is NOT tested "
            "in this run; unset TELHA_TEST_PG to run them (scripts/pg-test-server) !!!"
        )
    return None


def require_engine(name: str) -> str:
    """``name``, after making sure its database is there: for ``"postgres"`` the test
    cluster (skipped, loudly, only with ``TELHA_TEST_PG=0``; a cluster that cannot start
    fails the test)."""
    if name == "postgres":
        reason = pg_disabled_reason()
        if reason is not None:
            pytest.skip(reason)
        try:
            admin_dsn()
        except RuntimeError as exc:
            pytest.fail(str(exc), pytrace=False)
    return name


def admin_dsn() -> str:
    """The DSN of a database to create test databases from (``TELHA_TEST_PG_DSN``, else the
    cluster ``scripts/pg-test-server start`` starts or finds running).

    :raises RuntimeError: PostgreSQL is expected but cannot be started.
    """
    if _admin:
        return _admin[0]
    dsn = os.environ.get("TELHA_TEST_PG_DSN", "")
    if not dsn:
        proc = subprocess.run(
            [str(_SCRIPT), "start"], capture_output=True, text=True, timeout=180, check=False
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise RuntimeError(
                f"PostgreSQL is expected (TELHA_TEST_PG != 0) but {_SCRIPT} start failed"
                f" ({proc.returncode}):\n{proc.stderr}"
            )
        dsn = proc.stdout.strip().splitlines()[-1]
        os.environ["TELHA_TEST_PG_DSN"] = dsn
    _admin.append(dsn)
    return dsn


def _with_db(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _run(statement: str) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(admin_dsn())
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    # Own thread, own event loop: callable from sync fixtures and async tests alike.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, go).result()


def create_database() -> str:
    """A new empty database (``telha_test_<hex>``); returns its DSN."""
    name = f"telha_test_{uuid.uuid4().hex[:16]}"
    _run(f'CREATE DATABASE "{name}"')
    _created.append(name)
    return _with_db(admin_dsn(), name)


def drop_databases() -> None:
    """Drop every database this session created (connections are closed by force)."""
    while _created:
        name = _created.pop()
        _run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
