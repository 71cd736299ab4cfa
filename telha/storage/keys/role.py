"""The API key role of the storage seam (docs/cli-and-client.md, "API keys";
:mod:`telha.storage.keys.queries`). Times in µs."""

from __future__ import annotations

from typing import Protocol

from telha.domain.model import Scope
from telha.storage.keys.queries import KeyAccess, KeyRecord

__all__ = ["KeyStore"]


class KeyStore(Protocol):
    """REST API keys, a store's ``keys`` (:class:`~telha.storage.keys.aggregate.Keys`): minted
    by ``telha api-key create``, resolved per request by the REST front."""

    async def add(
        self,
        scope: Scope,
        key_id: str,
        key_hash: bytes,
        principals: tuple[str, ...] | None = None,
    ) -> None:
        """Store a REST API key's hash (never the key) for ``scope``, acting for
        ``principals`` (``None``: none)."""

    async def scope_for(self, key_hash: bytes) -> Scope | None:
        """The scope of a live (not revoked) key, or ``None``. Reads the store every call."""

    async def access(self, key_hash: bytes) -> KeyAccess | None:
        """The scope and principals of a live key, or ``None``. Reads the store every call."""

    async def listed(self, scope: Scope | None = None, *, revoked: bool = False) -> list[KeyRecord]:
        """The store's keys (or ``scope``'s), oldest first, without the revoked ones unless
        ``revoked``; never a key nor its hash."""

    async def revoke(self, key_id: str) -> int | None:
        """Revoke a key by id (a running REST front refuses it within 10 s); its revoke time
        in µs (the first, when revoked already), ``None`` for an unknown id."""

    async def used(self, key_hash: bytes, at: int) -> None:
        """Note a use of the key at ``at`` (µs) for :meth:`listed`' ``last_used_at``."""
