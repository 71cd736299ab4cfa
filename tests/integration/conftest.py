"""Integration fixtures: ``tenant`` and ``worker`` need a module's ``queue_srv`` fixture;
``store`` is a fresh in-process store of each engine, per test."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from telha.storage import StorageEngine
from tests.support.pg import ENGINES
from tests.support.queue_env import tenant, worker
from tests.support.stores import fresh_store

__all__ = ["store", "tenant", "worker"]


@pytest.fixture(params=ENGINES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageEngine]:
    """A new, empty, migrated store of each engine, open for the test's length."""
    async with fresh_store(str(request.param), tmp_path) as opened:
        yield opened
