"""The pure parts of the storage seam: driving an operation without an event loop, and the
PostgreSQL placeholder numbering (docs/architecture.md, "The storage seam")."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from telha.storage.core.tx import drive
from telha.storage.postgres.tx import numbered


async def _returns(value: int) -> int:
    return value


async def _awaits_a_sync_method() -> int:
    # What a SQLite operation does: every await is a coroutine that never suspends.
    return await _returns(1) + await _returns(2)


class _Suspend:
    """An awaitable that yields to its event loop once (as a real driver call does)."""

    def __await__(self) -> Generator[None, None, None]:
        yield


async def _suspends() -> int:
    await _Suspend()
    return 1


def test_drive_completes_a_coroutine_that_never_suspends() -> None:
    assert drive(_awaits_a_sync_method()) == 3


def test_drive_refuses_a_coroutine_that_suspends() -> None:
    with pytest.raises(RuntimeError, match="suspended"):
        drive(_suspends())


def test_numbered_placeholders_in_order() -> None:
    assert numbered("SELECT 1") == "SELECT 1"
    assert numbered("a = ? AND b = ANY(?::bytea[])") == "a = $1 AND b = ANY($2::bytea[])"
    assert numbered("(?, ?, ?)") == "($1, $2, $3)"
