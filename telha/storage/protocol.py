"""The storage seam (DESIGN.md §4, §9): domain operations, one engine module per database.

Engines own their SQL; everything above this Protocol speaks in :mod:`telha.model` records.
Engines raise :class:`~telha.errors.StorageError` for driver failures and
:class:`~telha.errors.NotFound` / :class:`~telha.errors.RequestError` where the caller asked
for something that is not there or not addressable.
"""

from __future__ import annotations

from typing import Protocol

from telha.ingest.projection import Projection
from telha.model import (
    CommitOutcome,
    Direction,
    EdgeRecord,
    NewVersion,
    NodeVersion,
    Scope,
    SourceVersion,
    SpanRecord,
)

__all__ = ["Storage"]


class Storage(Protocol):
    """Domain-level storage operations; every one is scoped by (tenant, organization)."""

    async def insert_api_key(self, scope: Scope, key_id: str, key_hash: bytes) -> None:
        """Store a REST API key's hash (never the key) for ``scope``."""

    async def scope_for_key(self, key_hash: bytes) -> Scope | None:
        """The scope of a live (not revoked) key, or ``None``. Reads the store every call."""

    async def latest_version(self, scope: Scope, source_id: bytes) -> SourceVersion | None:
        """The newest version of a source, or ``None`` for a new source."""

    async def commit_version(
        self, scope: Scope, version: NewVersion, projection: Projection, *, dedup_content: bool
    ) -> CommitOutcome:
        """Write one source version and its projection in one transaction (spec 004 apply_parts
        steps 3–6): version row, canonical text chunks, nodes, edges, span rows.

        With ``dedup_content`` the latest version is checked inside the same transaction and an
        equal ``content_hash`` writes nothing (``CommitOutcome.deduplicated``). All-or-nothing:
        on any failure nothing is left behind.
        """

    async def source_versions(self, scope: Scope, source_id: bytes) -> list[SourceVersion]:
        """All versions of a source, newest first; empty when the source is unknown."""

    async def read_text(
        self, scope: Scope, source_id: bytes, tx: int, start: int | None, end: int | None
    ) -> bytes:
        """Canonical text bytes ``[start, end)`` of one version (the slice API).

        :raises NotFound: no such version in ``scope``.
        :raises RequestError: range outside the text or not on UTF-8 boundaries.
        """

    async def span_rows(self, scope: Scope, source_id: bytes, tx: int) -> list[SpanRecord]:
        """The span reverse index of one version in document order.

        :raises NotFound: no such version in ``scope``.
        """

    async def get_node(self, scope: Scope, node_id: bytes, as_of: int | None) -> NodeVersion | None:
        """The node version current at transaction time ``as_of`` (µs; ``None`` = now)."""

    async def list_nodes(
        self,
        scope: Scope,
        *,
        label: str | None,
        source_id: bytes | None,
        limit: int,
        after: bytes | None,
    ) -> list[NodeVersion]:
        """Current nodes ordered by id, strictly after ``after``, at most ``limit``."""

    async def node_edges(
        self, scope: Scope, node_id: bytes, direction: Direction
    ) -> list[EdgeRecord]:
        """Current edges of a node whose far endpoint exists (dangling edges are left out)."""
