"""Read-only whole-store scans on PostgreSQL (:mod:`telha.storage.scan`, for ``telha check``).

One snapshot is one ``READ ONLY, REPEATABLE READ`` transaction on one pooled connection:
every statement sees the database as of the transaction's first statement, while the
replicas go on committing. Pages come from server-side cursors; batched lookups join
``unnest`` arrays of the keys against the tables' primary keys.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from telha.domain.errors import StorageError
from telha.domain.model import Scope
from telha.storage.postgres.base import Conn, PgBase
from telha.storage.scan import ScanEdge, ScanEvent, ScanJob, ScanNode, ScanSpan, ScanVersion

__all__ = ["PgScan", "ScanMixin"]

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
_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)


def _columns(keys: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    return [list(col) for col in zip(*keys, strict=True)]


class PgScan:
    """A :class:`~telha.storage.scan.StoreScan` inside one read-only repeatable-read
    transaction (made by :meth:`ScanMixin.scan`)."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def _pages(self, sql: str, page: int) -> AsyncIterator[list[tuple[Any, ...]]]:
        try:
            cur = await self._conn.cursor(sql)
            while rows := await cur.fetch(page):
                yield [tuple(r) for r in rows]
        except _ERRORS as exc:
            raise StorageError(f"scan failed: {exc}") from exc

    async def _all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        try:
            return [tuple(r) for r in await self._conn.fetch(sql, *args)]
        except _ERRORS as exc:
            raise StorageError(f"scan failed: {exc}") from exc

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
        if not keys:
            return []
        rows = await self._all(
            f"SELECT {_VERSION} FROM unnest($1::integer[], $2::bytea[], $3::bigint[]) k(a, b, c)"
            " JOIN source_versions v ON v.scope_id = k.a AND v.source_id = k.b AND v.tx = k.c",
            *_columns(keys),
        )
        return [ScanVersion(*r) for r in rows]

    async def final_content_hashes(
        self, keys: Sequence[tuple[int, bytes]]
    ) -> list[tuple[int, bytes, bytes]]:
        """See :meth:`telha.storage.scan.StoreScan.final_content_hashes`."""
        if not keys:
            return []
        rows = await self._all(
            "SELECT DISTINCT v.scope_id, v.source_id, v.content_hash"
            " FROM unnest($1::integer[], $2::bytea[]) k(a, b)"
            " JOIN source_versions v ON v.scope_id = k.a AND v.source_id = k.b"
            " WHERE v.canonical_text_hash IS NOT NULL",
            *_columns(keys),
        )
        return [(int(a), b, c) for a, b, c in rows]

    async def chunks(
        self, scope: int, blob_id: bytes, first: int, count: int
    ) -> list[tuple[int, bytes]]:
        """See :meth:`telha.storage.scan.StoreScan.chunks`."""
        rows = await self._all(
            "SELECT idx, data FROM blob_chunks WHERE scope_id = $1 AND blob_id = $2"
            " AND idx >= $3 ORDER BY idx LIMIT $4",
            scope,
            blob_id,
            first,
            count,
        )
        return [(int(i), bytes(d)) for i, d in rows]

    async def nodes(self, page: int) -> AsyncIterator[list[ScanNode]]:
        """See :meth:`telha.storage.scan.StoreScan.nodes`."""
        async for rows in self._pages(f"SELECT {_NODE} FROM nodes n ORDER BY 1, 2, 3", page):
            yield [ScanNode(*r) for r in rows]

    async def nodes_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanNode]:
        """See :meth:`telha.storage.scan.StoreScan.nodes_at`."""
        if not keys:
            return []
        rows = await self._all(
            f"SELECT {_NODE} FROM unnest($1::integer[], $2::bytea[], $3::bigint[]) k(a, b, c)"
            " JOIN nodes n ON n.scope_id = k.a AND n.node_id = k.b AND n.tx_from = k.c",
            *_columns(keys),
        )
        return [ScanNode(*r) for r in rows]

    async def node_exists(self, keys: Sequence[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
        """See :meth:`telha.storage.scan.StoreScan.node_exists`."""
        if not keys:
            return set()
        rows = await self._all(
            "SELECT k.a, k.b FROM unnest($1::integer[], $2::bytea[]) k(a, b)"
            " WHERE EXISTS (SELECT 1 FROM nodes n WHERE n.scope_id = k.a AND n.node_id = k.b)",
            *_columns(keys),
        )
        return {(int(a), b) for a, b in rows}

    async def span_rows(self, page: int) -> AsyncIterator[list[ScanSpan]]:
        """See :meth:`telha.storage.scan.StoreScan.span_rows`."""
        sql = f"SELECT {_SPAN} FROM span_rows s ORDER BY 1, 2, 3, 4, 5"
        async for rows in self._pages(sql, page):
            yield [ScanSpan(*r) for r in rows]

    async def span_rows_at(
        self, keys: Sequence[tuple[int, bytes, int, int, int]]
    ) -> list[ScanSpan]:
        """See :meth:`telha.storage.scan.StoreScan.span_rows_at`."""
        if not keys:
            return []
        rows = await self._all(
            f"SELECT {_SPAN} FROM unnest($1::integer[], $2::bytea[], $3::bigint[],"
            " $4::bigint[], $5::bigint[]) k(a, b, c, d, e)"
            " JOIN span_rows s ON s.scope_id = k.a AND s.source_id = k.b"
            ' AND s.source_version_tx = k.c AND s.start = k.d AND s."end" = k.e',
            *_columns(keys),
        )
        return [ScanSpan(*r) for r in rows]

    async def edges_from_tx(self, keys: Sequence[tuple[int, int]]) -> list[ScanEdge]:
        """See :meth:`telha.storage.scan.StoreScan.edges_from_tx`."""
        if not keys:
            return []
        rows = await self._all(
            "SELECT e.scope_id, e.edge_id, e.tx_from, e.tx_to"
            " FROM unnest($1::integer[], $2::bigint[]) k(a, b)"
            " JOIN edges e ON e.scope_id = k.a AND e.tx_from = k.b",
            *_columns(keys),
        )
        return [ScanEdge(*r) for r in rows]

    async def jobs(self, page: int) -> AsyncIterator[list[ScanJob]]:
        """See :meth:`telha.storage.scan.StoreScan.jobs`."""
        async for rows in self._pages(f"SELECT {_JOB} FROM jobs j ORDER BY 1", page):
            yield [ScanJob(*r) for r in rows]

    async def jobs_at(self, job_ids: Sequence[bytes]) -> list[ScanJob]:
        """See :meth:`telha.storage.scan.StoreScan.jobs_at`."""
        if not job_ids:
            return []
        rows = await self._all(
            f"SELECT {_JOB} FROM jobs j WHERE j.job_id = ANY($1::bytea[])", list(job_ids)
        )
        return [ScanJob(*r) for r in rows]

    async def job_events(self, job_ids: Sequence[bytes]) -> list[ScanEvent]:
        """See :meth:`telha.storage.scan.StoreScan.job_events`."""
        if not job_ids:
            return []
        rows = await self._all(
            "SELECT job_id, seq, transition, detail FROM job_events"
            " WHERE job_id = ANY($1::bytea[]) ORDER BY 1, 2",
            list(job_ids),
        )
        return [ScanEvent(*r) for r in rows]


class ScanMixin(PgBase):
    """The :meth:`~telha.storage.protocol.Storage.scan` operation of the PostgreSQL engine."""

    @asynccontextmanager
    async def scan(self) -> AsyncIterator[PgScan]:
        """A consistent read-only snapshot for as long as the block runs: one ``READ ONLY``,
        ``REPEATABLE READ`` transaction on a pooled connection (rolled back at the end).

        :raises StorageError: the database cannot be reached.
        """
        pool = self._require_pool()
        try:
            conn = await pool.acquire()
        except _ERRORS as exc:
            raise StorageError(f"cannot scan {self.location}: {exc}") from exc
        try:
            tx = conn.transaction(isolation="repeatable_read", readonly=True)
            await tx.start()
            try:
                yield PgScan(conn)
            finally:
                await tx.rollback()
        finally:
            await pool.release(conn)
