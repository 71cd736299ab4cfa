"""Read-only whole-store scans on SQLite (:mod:`telha.storage.scan`, for ``telha check``).

One snapshot is one read transaction on one ``mode=ro`` connection of the reader pool
(WAL: the writer of a live ``telha serve`` goes on committing; the snapshot does not move).
Pages come from one cursor per scan; batched lookups join a ``VALUES`` list against the
table's primary key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite

from telha.domain.errors import StorageError
from telha.domain.model import Scope
from telha.storage.scan import ScanEdge, ScanEvent, ScanJob, ScanNode, ScanSpan, ScanVersion
from telha.storage.sqlite.base import SqliteBase

__all__ = ["ScanMixin", "SqliteScan"]

_VERSION = (
    "v.scope_id, v.source_id, v.tx, v.name, v.format, v.content_hash, v.canonical_text_hash,"
    " v.worker, v.job_id, v.blob_id, v.text_len, v.erased_at"
)
_NODE = "n.scope_id, n.node_id, n.tx_from, n.tx_to, n.source_id, n.provenance"
_SPAN = 's.scope_id, s.source_id, s.source_version_tx, s.start, s."end", s.kind, s.linked_nodes'
_JOB = (
    "j.job_id, j.scope_id, j.kind, j.format, j.source_id, j.content_hash, j.state, j.attempts,"
    " j.lease_generation, j.lease_owner, j.lease_deadline, j.failure_reason, j.continuation"
)
#: Keys per batched lookup (× at most 5 columns, well under SQLite's 32,766 parameters).
_BATCH = 500


def _keys_cte(keys: Sequence[tuple[Any, ...]], cols: str) -> tuple[str, list[Any]]:
    """``WITH k(cols) AS (VALUES (?, …), …)`` and its flat parameters."""
    width = len(keys[0])
    group = "(" + ", ".join("?" * width) + ")"
    params = [v for key in keys for v in key]
    return f"WITH k({cols}) AS (VALUES {', '.join([group] * len(keys))}) ", params


class SqliteScan:
    """A :class:`~telha.storage.scan.StoreScan` over one connection inside one read
    transaction (made by :meth:`ScanMixin.scan`)."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def _pages(self, sql: str, page: int) -> AsyncIterator[list[tuple[Any, ...]]]:
        try:
            async with self._conn.execute(sql) as cur:
                while rows := await cur.fetchmany(page):
                    yield [tuple(r) for r in rows]
        except sqlite3.Error as exc:
            raise StorageError(f"scan failed: {exc}") from exc

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return [tuple(r) for r in await self._conn.execute_fetchall(sql, params)]
        except sqlite3.Error as exc:
            raise StorageError(f"scan failed: {exc}") from exc

    async def _lookup(
        self, keys: Sequence[tuple[Any, ...]], cols: str, select: str
    ) -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = []
        for i in range(0, len(keys), _BATCH):
            head, params = _keys_cte(keys[i : i + _BATCH], cols)
            found += await self._all(head + select, params)
        return found

    async def scopes(self) -> dict[int, Scope]:
        """See :meth:`telha.storage.scan.StoreScan.scopes`."""
        rows = await self._all("SELECT scope_id, tenant_id, organization_id FROM scopes")
        return {int(sid): Scope(t, o) for sid, t, o in rows}

    async def versions(self, page: int) -> AsyncIterator[list[ScanVersion]]:
        """See :meth:`telha.storage.scan.StoreScan.versions`."""
        sql = f"SELECT {_VERSION} FROM source_versions v ORDER BY 1, 2, 3"
        async for rows in self._pages(sql, page):
            yield [ScanVersion(*r) for r in rows]

    async def versions_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanVersion]:
        """See :meth:`telha.storage.scan.StoreScan.versions_at`."""
        select = (
            f"SELECT {_VERSION} FROM k JOIN source_versions v ON v.scope_id = k.a"
            " AND v.source_id = k.b AND v.tx = k.c"
        )
        return [ScanVersion(*r) for r in await self._lookup(keys, "a, b, c", select)]

    async def final_content_hashes(
        self, keys: Sequence[tuple[int, bytes]]
    ) -> list[tuple[int, bytes, bytes]]:
        """See :meth:`telha.storage.scan.StoreScan.final_content_hashes`."""
        select = (
            "SELECT DISTINCT v.scope_id, v.source_id, v.content_hash FROM k"
            " JOIN source_versions v ON v.scope_id = k.a AND v.source_id = k.b"
            " WHERE v.canonical_text_hash IS NOT NULL"
        )
        return [(int(a), b, c) for a, b, c in await self._lookup(keys, "a, b", select)]

    async def chunks(
        self, scope: int, blob_id: bytes, first: int, count: int
    ) -> list[tuple[int, bytes]]:
        """See :meth:`telha.storage.scan.StoreScan.chunks`."""
        rows = await self._all(
            "SELECT idx, data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx >= ?"
            " ORDER BY idx LIMIT ?",
            (scope, blob_id, first, count),
        )
        return [(int(i), bytes(d)) for i, d in rows]

    async def nodes(self, page: int) -> AsyncIterator[list[ScanNode]]:
        """See :meth:`telha.storage.scan.StoreScan.nodes`."""
        async for rows in self._pages(f"SELECT {_NODE} FROM nodes n ORDER BY 1, 2, 3", page):
            yield [ScanNode(*r) for r in rows]

    async def nodes_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanNode]:
        """See :meth:`telha.storage.scan.StoreScan.nodes_at`."""
        select = (
            f"SELECT {_NODE} FROM k JOIN nodes n ON n.scope_id = k.a AND n.node_id = k.b"
            " AND n.tx_from = k.c"
        )
        return [ScanNode(*r) for r in await self._lookup(keys, "a, b, c", select)]

    async def node_exists(self, keys: Sequence[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
        """See :meth:`telha.storage.scan.StoreScan.node_exists`."""
        select = (
            "SELECT k.a, k.b FROM k WHERE EXISTS (SELECT 1 FROM nodes n"
            " WHERE n.scope_id = k.a AND n.node_id = k.b)"
        )
        return {(int(a), b) for a, b in await self._lookup(keys, "a, b", select)}

    async def span_rows(self, page: int) -> AsyncIterator[list[ScanSpan]]:
        """See :meth:`telha.storage.scan.StoreScan.span_rows`."""
        sql = f"SELECT {_SPAN} FROM span_rows s ORDER BY 1, 2, 3, 4, 5"
        async for rows in self._pages(sql, page):
            yield [ScanSpan(*r) for r in rows]

    async def span_rows_at(
        self, keys: Sequence[tuple[int, bytes, int, int, int]]
    ) -> list[ScanSpan]:
        """See :meth:`telha.storage.scan.StoreScan.span_rows_at`."""
        select = (
            f"SELECT {_SPAN} FROM k JOIN span_rows s ON s.scope_id = k.a AND s.source_id = k.b"
            ' AND s.source_version_tx = k.c AND s.start = k.d AND s."end" = k.e'
        )
        return [ScanSpan(*r) for r in await self._lookup(keys, "a, b, c, d, e", select)]

    async def edges_from_tx(self, keys: Sequence[tuple[int, int]]) -> list[ScanEdge]:
        """See :meth:`telha.storage.scan.StoreScan.edges_from_tx`."""
        select = (
            "SELECT e.scope_id, e.edge_id, e.tx_from, e.tx_to FROM k JOIN edges e"
            " ON e.scope_id = k.a AND e.tx_from = k.b"
        )
        return [ScanEdge(*r) for r in await self._lookup(keys, "a, b", select)]

    async def jobs(self, page: int) -> AsyncIterator[list[ScanJob]]:
        """See :meth:`telha.storage.scan.StoreScan.jobs`."""
        async for rows in self._pages(f"SELECT {_JOB} FROM jobs j ORDER BY 1", page):
            yield [ScanJob(*r) for r in rows]

    async def jobs_at(self, job_ids: Sequence[bytes]) -> list[ScanJob]:
        """See :meth:`telha.storage.scan.StoreScan.jobs_at`."""
        select = f"SELECT {_JOB} FROM k JOIN jobs j ON j.job_id = k.a"
        return [ScanJob(*r) for r in await self._lookup([(j,) for j in job_ids], "a", select)]

    async def job_events(self, job_ids: Sequence[bytes]) -> list[ScanEvent]:
        """See :meth:`telha.storage.scan.StoreScan.job_events`."""
        select = (
            "SELECT e.job_id, e.seq, e.transition, e.detail FROM k JOIN job_events e"
            " ON e.job_id = k.a ORDER BY 1, 2"
        )
        rows = await self._lookup([(j,) for j in job_ids], "a", select)
        return [ScanEvent(*r) for r in rows]


class ScanMixin(SqliteBase):
    """The :meth:`~telha.storage.protocol.Storage.scan` operation of the SQLite engine."""

    @asynccontextmanager
    async def scan(self) -> AsyncIterator[SqliteScan]:
        """A consistent read-only snapshot for as long as the block runs (one read
        transaction on a pooled ``mode=ro`` connection; WAL keeps it stable while the writer
        commits, and the WAL cannot be checkpointed past it meanwhile)."""
        async with self._reader() as conn:
            await conn.execute("BEGIN")
            # A read transaction takes its snapshot at its first read, not at BEGIN.
            await conn.execute_fetchall("SELECT count(*) FROM scopes")
            try:
                yield SqliteScan(conn)
            finally:
                await conn.execute("ROLLBACK")
