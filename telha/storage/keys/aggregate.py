"""The API key aggregate of a store (``store.keys``; docs/cli-and-client.md, "API keys")."""

from __future__ import annotations

from telha.domain.ids import now_us
from telha.domain.model import Scope
from telha.storage.core.engine import EngineOps
from telha.storage.keys.queries import (
    KeyAccess,
    KeyRecord,
    insert_api_key,
    key_access,
    key_used,
    list_keys,
    revoke_key,
    scope_for_key,
)

__all__ = ["Keys"]


class Keys:
    """The API key aggregate of a store (``store.keys``; its contract:
    :class:`telha.storage.keys.role.KeyStore`): each operation one transaction or one
    read of ``engine``. A component the store composes, not a mixin."""

    def __init__(self, engine: EngineOps) -> None:
        self._engine = engine

    async def add(
        self, scope: Scope, key_id: str, key_hash: bytes, principals: tuple[str, ...] | None = None
    ) -> None:
        """See :func:`insert_api_key` (now)."""
        await self._engine.transaction(
            "store api key", insert_api_key, scope, key_id, key_hash, now_us(), principals
        )

    async def scope_for(self, key_hash: bytes) -> Scope | None:
        """See :func:`scope_for_key`."""
        return await self._engine.read(scope_for_key, key_hash)

    async def access(self, key_hash: bytes) -> KeyAccess | None:
        """See :func:`key_access`."""
        return await self._engine.read(key_access, key_hash)

    async def listed(self, scope: Scope | None = None, *, revoked: bool = False) -> list[KeyRecord]:
        """See :func:`list_keys`."""
        return await self._engine.read(list_keys, scope, revoked)

    async def revoke(self, key_id: str) -> int | None:
        """See :func:`revoke_key` (now)."""
        return await self._engine.transaction("revoke api key", revoke_key, key_id, now_us())

    async def used(self, key_hash: bytes, at: int) -> None:
        """See :func:`key_used`."""
        await self._engine.transaction("note api key use", key_used, key_hash, at)
