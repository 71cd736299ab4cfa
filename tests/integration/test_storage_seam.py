"""The storage seam's runners (docs/architecture.md, "The storage seam") on both engines: an
operation that rolls back leaves nothing behind, not even in the engine's caches."""

from __future__ import annotations

import blake3
import pytest

from telha.domain.model import Scope
from telha.storage import StorageEngine
from telha.storage.core.tx import Rollback, Tx

pytestmark = pytest.mark.anyio


async def _intern_then_roll_back(tx: Tx, scope: Scope) -> int:
    sid = await tx.scope_id(scope)
    raise Rollback(sid)


async def _read_scope(tx: Tx, scope: Scope) -> int | None:
    return await tx.known_scope_id(scope)


async def test_a_rolled_back_scope_is_never_cached(store: StorageEngine) -> None:
    scope = Scope("seam-tenant", "org")
    engine = store  # the runners are the engine's own: exercise them directly
    interned = await engine._transaction("intern", _intern_then_roll_back, scope)  # type: ignore[attr-defined]
    assert isinstance(interned, int)
    assert await engine._read(_read_scope, scope) is None  # type: ignore[attr-defined]
    # The next write interns the scope for real and uses its committed id.
    key = blake3.blake3(b"seam key").digest()
    await store.insert_api_key(scope, "seam-key", key)
    assert await store.scope_for_key(key) == scope
    assert await engine._read(_read_scope, scope) is not None  # type: ignore[attr-defined]
