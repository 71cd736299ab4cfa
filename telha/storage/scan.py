"""Read-only scans of a whole store, for ``telha check`` (docs/operations.md, "telha check"):
what a scan returns. Both engines implement it once, in :mod:`telha.storage.core.scan`.

A :class:`StoreScan` is one consistent snapshot (SQLite: one read transaction on a ``mode=ro``
connection; PostgreSQL: one ``READ ONLY, REPEATABLE READ`` transaction), so a check may run
beside a live ``telha serve`` and still see every table as of one instant. Big tables are
streamed in pages in primary-key order; point lookups take a batch of keys at once.

Rows come back nearly as stored (JSON and packed id columns undecoded), so a corrupt value is
something the checks can report rather than a decoding error. ``scope`` is the engine's
interned scope number; :meth:`StoreScan.scopes` names them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from telha.domain.model import Scope

__all__ = [
    "ScanEdge",
    "ScanEvent",
    "ScanJob",
    "ScanNode",
    "ScanSpan",
    "ScanVersion",
    "StoreScan",
]


@dataclass(frozen=True, slots=True)
class ScanVersion:
    """One ``source_versions`` row. ``tx`` µs; ``text_len`` bytes (0 while a stream is open);
    ``canonical_text_hash`` ``None`` for a streamed version not (or never) finalized;
    ``erased_at`` µs, ``None`` unless the version was erased (its text chunks are redaction
    records since, no bytes)."""

    scope: int
    source_id: bytes
    tx: int
    name: str
    format: str
    content_hash: bytes
    canonical_text_hash: bytes | None
    worker: str | None
    job_id: bytes | None
    blob_id: bytes | None
    text_len: int | None
    erased_at: int | None = None


@dataclass(frozen=True, slots=True)
class ScanNode:
    """One node version row: ``provenance`` is the stored JSON, undecoded: ``[start, end]``
    spans are UTF-8 byte offsets into the version ``(source_id, tx_from)``, ``[start, end, tx]``
    into ``(source_id, tx)`` (the version an erasure appends keeps its surviving spans')."""

    scope: int
    node_id: bytes
    tx_from: int
    tx_to: int | None
    source_id: bytes | None
    provenance: bytes


@dataclass(frozen=True, slots=True)
class ScanSpan:
    """One span reverse-index row; ``linked_nodes`` is the stored concatenation of 16-byte
    node ids."""

    scope: int
    source_id: bytes
    tx: int
    start: int
    end: int
    kind: str
    linked_nodes: bytes


@dataclass(frozen=True, slots=True)
class ScanEdge:
    """An edge version's identity and transaction-time interval (µs)."""

    scope: int
    edge_id: bytes
    tx_from: int
    tx_to: int | None


@dataclass(frozen=True, slots=True)
class ScanJob:
    """One job row (payload left out); ``continuation`` is the stored streaming checkpoint
    (msgpack), ``lease_deadline`` µs."""

    job_id: bytes
    scope: int
    kind: str
    format: str
    source_id: bytes
    content_hash: bytes | None
    state: str
    attempts: int
    lease_generation: int
    lease_owner: str | None
    lease_deadline: int | None
    failure_reason: str | None
    continuation: bytes | None


@dataclass(frozen=True, slots=True)
class ScanEvent:
    """One job event (``seq`` 1-based, in order)."""

    job_id: bytes
    seq: int
    transition: str
    detail: str | None


class StoreScan(Protocol):
    """A read-only snapshot of a store. Page iterators yield lists of at most ``page`` rows
    in primary-key order; ``*_at`` lookups return the rows found for the keys given (in no
    particular order; a key with no row is simply absent). Nothing here writes.

    :raises telha.domain.errors.StorageError: a driver failure (wrapped), from any method.
    """

    async def scopes(self) -> dict[int, Scope]:
        """Every interned scope by its number."""

    def versions(self, page: int) -> AsyncIterator[list[ScanVersion]]:
        """Every source version, by ``(scope, source_id, tx)``."""

    async def versions_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanVersion]:
        """The versions with these ``(scope, source_id, tx)`` keys."""

    async def final_content_hashes(
        self, keys: Sequence[tuple[int, bytes]]
    ) -> list[tuple[int, bytes, bytes]]:
        """``(scope, source_id, content_hash)`` of every finalized version of the given
        sources (each pair once)."""

    async def chunks(
        self, scope: int, blob_id: bytes, first: int, count: int
    ) -> list[tuple[int, bytes]]:
        """``(idx, data)`` of at most ``count`` canonical text chunks of ``blob_id`` from index
        ``first`` on, in index order (each at most 1 MiB)."""

    def nodes(self, page: int) -> AsyncIterator[list[ScanNode]]:
        """Every node version, by ``(scope, node_id, tx_from)``."""

    async def nodes_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanNode]:
        """The node versions with these ``(scope, node_id, tx_from)`` keys."""

    async def node_exists(self, keys: Sequence[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
        """Which of these ``(scope, node_id)`` have any node version at all."""

    def span_rows(self, page: int) -> AsyncIterator[list[ScanSpan]]:
        """Every span row, by ``(scope, source_id, tx, start, end)`` (document order)."""

    async def span_rows_at(
        self, keys: Sequence[tuple[int, bytes, int, int, int]]
    ) -> list[ScanSpan]:
        """The span rows with these ``(scope, source_id, tx, start, end)`` keys."""

    async def edges_from_tx(self, keys: Sequence[tuple[int, int]]) -> list[ScanEdge]:
        """The edge versions written at these ``(scope, tx_from)`` transaction times."""

    def jobs(self, page: int) -> AsyncIterator[list[ScanJob]]:
        """Every job, by ``job_id``."""

    async def jobs_at(self, job_ids: Sequence[bytes]) -> list[ScanJob]:
        """The jobs with these ids."""

    async def job_events(self, job_ids: Sequence[bytes]) -> list[ScanEvent]:
        """Every event of these jobs, by ``(job_id, seq)``."""
