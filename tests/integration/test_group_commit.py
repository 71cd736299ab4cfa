"""Group commit on the SQLite engine (docs/architecture.md, "The storage seam"): transactions
queued while the writer is busy commit together, each outcome still its own — one that fails
or rolls back leaves nothing of itself behind, not even in the scope cache, and takes nothing
of the others with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from telha.config import Config, StorageConfig
from telha.domain.errors import StorageError
from telha.domain.model import Scope
from telha.storage import open_store
from telha.storage.core.tx import Rollback, Tx
from tests.support.wait import until

pytestmark = pytest.mark.anyio


class Refused(Exception):
    """What a member of the group raises on purpose."""


async def _intern(tx: Tx, scope: Scope, how: str) -> int:
    sid = await tx.scope_id(scope)
    if how == "raise":
        raise Refused(scope.tenant_id)
    if how == "rollback":
        raise Rollback(-sid)
    if how == "bad sql":
        await tx.execute("INSERT INTO no_such_table VALUES (1)")
    return sid


async def _known(tx: Tx, scope: Scope) -> int | None:
    return await tx.known_scope_id(scope)


async def test_each_member_of_a_group_keeps_its_own_outcome(tmp_path: Path) -> None:
    config = Config(storage=StorageConfig(path=str(tmp_path / "t.db"), readers=1))
    hows = ["ok", "raise", "ok", "rollback", "bad sql", "ok"]
    outcomes: dict[int, Any] = {}
    async with open_store(config, tmp_path) as store:
        engine: Any = store  # the engine's own runners, exercised directly

        async def member(i: int) -> None:
            try:
                outcomes[i] = await engine._transaction("intern", _intern, scopes[i], hows[i])
            except (Refused, StorageError) as exc:
                outcomes[i] = exc

        async def all_queued() -> bool:
            return len(engine._queued) == len(hows)

        scopes = [Scope(f"group-{i}", "org") for i in range(len(hows))]
        # The writer is busy: every member queues behind it and they run as one group.
        async with anyio.create_task_group() as tg, engine._write_lock:
            for i in range(len(hows)):
                tg.start_soon(member, i)
            await until(all_queued, within_s=10)
        assert isinstance(outcomes[1], Refused)
        assert isinstance(outcomes[3], int) and outcomes[3] < 0  # the rollback's value
        assert isinstance(outcomes[4], StorageError) and "no_such_table" in str(outcomes[4])
        for i, how in enumerate(hows):
            known = await engine._read(_known, scopes[i])
            if how == "ok":
                assert known == outcomes[i]
                assert engine._scopes[scopes[i]] == known
            else:
                assert known is None
                assert scopes[i] not in engine._scopes
        # The ids the rolled-back members took are free again: the next intern reuses one.
        sid = await engine._transaction("intern", _intern, Scope("after", "org"), "ok")
        assert sid not in {outcomes[i] for i, how in enumerate(hows) if how == "ok"}
