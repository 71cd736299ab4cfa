"""The whole-store snapshot of ``telha check`` (docs/operations.md, "telha check"), written
once for both engines: a :class:`Scan` over the engine's
:meth:`~telha.storage.core.engine.EngineOps.snapshot`.

Big tables are streamed from one cursor per scan, in primary-key order. Batched lookups join
the keys against the table's primary key: on PostgreSQL all of them at once, as ``unnest``
arrays; on SQLite a ``VALUES`` list of at most 500 keys per statement (the dialect's
:meth:`~telha.storage.core.dialect.Dialect.key_table` and ``in_group``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from telha.domain.model import Scope
from telha.domain.scan import (
    ScanCurrentNode,
    ScanCurrentVersions,
    ScanEdge,
    ScanEvent,
    ScanJob,
    ScanNode,
    ScanOpenRows,
    ScanRetired,
    ScanSourceRow,
    ScanSpan,
    ScanVersion,
)
from telha.storage.core.tx import SnapshotTx
from telha.storage.core.visible import visible
from telha.storage.search.scan import SearchProblems, search_problems

__all__ = ["Scan"]

_VERSION = (
    "v.scope_id, v.source_id, v.tx, v.name, v.format, v.content_hash, v.canonical_text_hash,"
    " v.worker, v.job_id, v.blob_id, v.text_len, v.erased_at, v.published_tx, v.retired_tx,"
    " v.fingerprint, v.identity, v.reason"
)
_NODE = "n.scope_id, n.node_id, n.tx_from, n.tx_to, n.source_id, n.provenance"
_SPAN = 's.scope_id, s.source_id, s.source_version_tx, s.start, s."end", s.kind, s.linked_nodes'
_JOB = (
    "j.job_id, j.scope_id, j.kind, j.format, j.source_id, j.content_hash, j.state, j.attempts,"
    " j.lease_generation, j.lease_owner, j.lease_deadline, j.failure_reason, j.continuation"
)
#: The tx of the current version of row ``{a}``'s source: its latest published version that
#: is not erased (one probe of the ``source_versions`` primary key per source).
_CURRENT_TX = (
    "(SELECT max(m.tx) FROM source_versions m WHERE m.scope_id = {a}.scope_id"
    " AND m.source_id = {a}.source_id AND m.published_tx IS NOT NULL AND m.erased_at IS NULL)"
)
_NOW_NODE, _ = visible("n", None)
_NOW_EDGE, _ = visible("e", None, node=False)
_NAMES = ("a", "b", "c", "d", "e")


class Scan:
    """A read-only snapshot of a whole store (made by
    :meth:`telha.storage.core.operations.SharedOps.scan`), for ``telha check``. Page
    iterators yield lists of at most ``page`` rows in primary-key order; ``*_at`` lookups
    return the rows found for the keys given (in no particular order; a key with no row is
    simply absent). Nothing here writes.

    :raises telha.domain.errors.StorageError: a driver failure (wrapped), from any method.
    """

    def __init__(self, tx: SnapshotTx) -> None:
        self._tx = tx

    def _by(self, index: str) -> str:
        """The dialect's :meth:`~telha.storage.core.dialect.Dialect.indexed_by`."""
        return self._tx.dialect.indexed_by(index)

    def _batches(self, keys: Sequence[Any]) -> list[Sequence[Any]]:
        """``keys`` in the slices one statement takes: at most the dialect's
        :attr:`~telha.storage.core.dialect.Dialect.in_group` (SQLite: 500 keys, × at most 5
        columns well under its 32,766 parameters), all at once where they bind as arrays."""
        step = self._tx.dialect.in_group or max(len(keys), 1)
        return [keys[i : i + step] for i in range(0, len(keys), step)]

    async def _lookup(
        self, keys: Sequence[tuple[Any, ...]], types: Sequence[str], select: str
    ) -> list[tuple[Any, ...]]:
        """The rows of ``select``, whose ``{k}`` reads the keys as table ``k(a, b, …)``;
        ``types`` are the PostgreSQL array types of the key columns."""
        cols = ", ".join(_NAMES[: len(types)])
        found: list[tuple[Any, ...]] = []
        for batch in self._batches(keys):
            prefix, table, params = self._tx.dialect.key_table(cols, types, batch)
            found += await self._tx.fetchall(prefix + select.replace("{k}", table), *params)
        return found

    async def _by_job(
        self, job_ids: Sequence[bytes], column: str, select: str
    ) -> list[tuple[Any, ...]]:
        """The rows of ``select``, whose ``{ids}`` is ``column`` being one of ``job_ids``."""
        found: list[tuple[Any, ...]] = []
        for batch in self._batches(job_ids):
            cond, params = self._tx.dialect.any(column, batch, "bytea")
            found += await self._tx.fetchall(select.replace("{ids}", cond), *params)
        return found

    async def scopes(self) -> dict[int, Scope]:
        """Every interned scope by its number."""
        rows = await self._tx.fetchall("SELECT scope_id, tenant_id, organization_id FROM scopes")
        return {int(sid): Scope(t, o) for sid, t, o in rows}

    async def versions(self, page: int) -> AsyncIterator[list[ScanVersion]]:
        """Every source version, by ``(scope, source_id, tx)``."""
        sql = f"SELECT {_VERSION} FROM source_versions v ORDER BY 1, 2, 3"
        async for rows in self._tx.pages(sql, page):
            yield [ScanVersion(*r) for r in rows]

    async def versions_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanVersion]:
        """The versions with these ``(scope, source_id, tx)`` keys."""
        select = (
            f"SELECT {_VERSION} FROM {{k}} JOIN source_versions v ON v.scope_id = k.a"
            " AND v.source_id = k.b AND v.tx = k.c"
        )
        rows = await self._lookup(keys, ("integer", "bytea", "bigint"), select)
        return [ScanVersion(*r) for r in rows]

    async def final_content_hashes(
        self, keys: Sequence[tuple[int, bytes]]
    ) -> list[tuple[int, bytes, bytes]]:
        """``(scope, source_id, content_hash)`` of every finalized version of the given
        sources (each pair once)."""
        select = (
            "SELECT DISTINCT v.scope_id, v.source_id, v.content_hash FROM {k}"
            " JOIN source_versions v ON v.scope_id = k.a AND v.source_id = k.b"
            " WHERE v.canonical_text_hash IS NOT NULL"
        )
        rows = await self._lookup(keys, ("integer", "bytea"), select)
        return [(int(a), b, c) for a, b, c in rows]

    async def chunks(
        self, scope: int, blob_id: bytes, first: int, count: int
    ) -> list[tuple[int, bytes]]:
        """``(idx, data)`` of at most ``count`` canonical text chunks of ``blob_id`` from index
        ``first`` on, in index order (each at most 1 MiB)."""
        rows = await self._tx.fetchall(
            "SELECT idx, data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx >= ?"
            " ORDER BY idx LIMIT ?",
            scope,
            blob_id,
            first,
            count,
        )
        return [(int(i), bytes(d)) for i, d in rows]

    async def nodes(self, page: int) -> AsyncIterator[list[ScanNode]]:
        """Every node version, by ``(scope, node_id, tx_from)``."""
        async for rows in self._tx.pages(f"SELECT {_NODE} FROM nodes n ORDER BY 1, 2, 3", page):
            yield [ScanNode(*r) for r in rows]

    async def nodes_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanNode]:
        """The node versions with these ``(scope, node_id, tx_from)`` keys."""
        select = (
            f"SELECT {_NODE} FROM {{k}} JOIN nodes n ON n.scope_id = k.a AND n.node_id = k.b"
            " AND n.tx_from = k.c"
        )
        rows = await self._lookup(keys, ("integer", "bytea", "bigint"), select)
        return [ScanNode(*r) for r in rows]

    async def node_exists(self, keys: Sequence[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
        """Which of these ``(scope, node_id)`` have any node version at all."""
        select = (
            "SELECT k.a, k.b FROM {k} WHERE EXISTS (SELECT 1 FROM nodes n"
            " WHERE n.scope_id = k.a AND n.node_id = k.b)"
        )
        return {(int(a), b) for a, b in await self._lookup(keys, ("integer", "bytea"), select)}

    async def span_rows(self, page: int) -> AsyncIterator[list[ScanSpan]]:
        """Every span row, by ``(scope, source_id, tx, start, end)`` (document order)."""
        sql = f"SELECT {_SPAN} FROM span_rows s ORDER BY 1, 2, 3, 4, 5"
        async for rows in self._tx.pages(sql, page):
            yield [ScanSpan(*r) for r in rows]

    async def span_rows_at(
        self, keys: Sequence[tuple[int, bytes, int, int, int]]
    ) -> list[ScanSpan]:
        """The span rows with these ``(scope, source_id, tx, start, end)`` keys."""
        select = (
            f"SELECT {_SPAN} FROM {{k}} JOIN span_rows s ON s.scope_id = k.a"
            " AND s.source_id = k.b AND s.source_version_tx = k.c AND s.start = k.d"
            ' AND s."end" = k.e'
        )
        types = ("integer", "bytea", "bigint", "bigint", "bigint")
        return [ScanSpan(*r) for r in await self._lookup(keys, types, select)]

    async def edges_from_tx(self, keys: Sequence[tuple[int, int]]) -> list[ScanEdge]:
        """The edge versions written at these ``(scope, tx_from)`` transaction times."""
        select = (
            "SELECT e.scope_id, e.edge_id, e.tx_from, e.tx_to FROM {k} JOIN edges e"
            " ON e.scope_id = k.a AND e.tx_from = k.b"
        )
        return [ScanEdge(*r) for r in await self._lookup(keys, ("integer", "bigint"), select)]

    async def current_versions(self, page: int) -> AsyncIterator[list[ScanCurrentVersions]]:
        """Per source with current rows a version wrote, by ``(scope, source_id)``: how many
        versions wrote them and the source's current version (one pass over the open node
        and edge rows, grouped in the database). An edge row an older version wrote counts
        as the current version's when its mark (docs/architecture.md, "Kept edges") is the
        current version's tx or a later one's: a later version, still streaming or
        abandoned, can only have marked a row the current version kept."""
        current = _CURRENT_TX.format(a="e")
        kept = (
            f"CASE WHEN e.seen_tx IS NOT NULL AND e.seen_tx >= {current}"
            f" THEN {current} ELSE e.tx_from END"
        )
        sql = (
            f"WITH w(scope_id, source_id, tx) AS (SELECT DISTINCT n.scope_id, n.source_id,"
            f" n.tx_from FROM nodes n WHERE {_NOW_NODE} UNION SELECT DISTINCT e.scope_id,"
            f" e.source_id, {kept} FROM edges e WHERE {_NOW_EDGE})"
            " SELECT w.scope_id, w.source_id, count(*), min(w.tx), max(w.tx), c.tx, c.retired_tx"
            " FROM w JOIN source_versions v ON v.scope_id = w.scope_id"
            " AND v.source_id = w.source_id AND v.tx = w.tx"
            " LEFT JOIN source_versions c ON c.scope_id = w.scope_id"
            f" AND c.source_id = w.source_id AND c.tx = {_CURRENT_TX.format(a='w')}"
            " GROUP BY w.scope_id, w.source_id, c.tx, c.retired_tx ORDER BY 1, 2"
        )
        async for rows in self._tx.pages(sql, page):
            yield [ScanCurrentVersions(*r) for r in rows]

    async def current_nodes(self, page: int) -> AsyncIterator[list[ScanCurrentNode]]:
        """Every current node version with its source's current version, by ``(scope,
        node_id, tx_from)``."""
        sql = (
            "SELECT n.scope_id, n.node_id, n.tx_from, n.source_id, n.provenance, c.tx,"
            " c.retired_tx FROM nodes n LEFT JOIN source_versions c ON c.scope_id = n.scope_id"
            f" AND c.source_id = n.source_id AND c.tx = {_CURRENT_TX.format(a='n')}"
            f" WHERE {_NOW_NODE} ORDER BY 1, 2, 3"
        )
        async for rows in self._tx.pages(sql, page):
            yield [ScanCurrentNode(*r) for r in rows]

    async def open_rows_at(self, keys: Sequence[tuple[int, bytes, int]]) -> list[ScanOpenRows]:
        """How many open node and edge rows each version ``(scope, source_id, tx)`` wrote."""
        select = (
            f"SELECT k.a, k.b, k.c, (SELECT count(*) FROM nodes n{self._by('nodes_by_source')}"
            " WHERE n.scope_id = k.a AND n.source_id = k.b AND n.tx_from = k.c"
            f" AND n.tx_to IS NULL), (SELECT count(*) FROM edges e{self._by('edges_by_tx')}"
            " WHERE e.scope_id = k.a AND e.source_id = k.b AND e.tx_from = k.c"
            " AND e.tx_to IS NULL) FROM {k}"
        )
        rows = await self._lookup(keys, ("integer", "bytea", "bigint"), select)
        return [ScanOpenRows(*r) for r in rows]

    async def retired(self, page: int) -> AsyncIterator[list[ScanRetired]]:
        """Every retired source (its current version carries ``retired_tx``) with how many
        of its rows are current, by ``(scope, source_id)``."""
        sql = (
            "SELECT c.scope_id, c.source_id, c.tx, c.retired_tx, (SELECT count(*) FROM nodes n"
            f"{self._by('nodes_by_source')} WHERE n.scope_id = c.scope_id"
            f" AND n.source_id = c.source_id AND {_NOW_NODE}), (SELECT count(*) FROM edges e"
            f"{self._by('edges_by_source')} WHERE e.scope_id = c.scope_id"
            f" AND e.source_id = c.source_id AND {_NOW_EDGE}) FROM source_versions c"
            f" WHERE c.retired_tx IS NOT NULL AND c.tx = {_CURRENT_TX.format(a='c')}"
            " ORDER BY 1, 2"
        )
        async for rows in self._tx.pages(sql, page):
            yield [ScanRetired(*r) for r in rows]

    async def source_rows(self, page: int) -> AsyncIterator[list[ScanSourceRow]]:
        """Every ``sources`` row with its last job's presence (a primary-key probe) and
        whether it has a version row, by ``(scope, source_id)``."""
        sql = (
            "SELECT s.scope_id, s.source_id, s.state, s.last_job_id, EXISTS (SELECT 1 FROM jobs"
            " j WHERE j.job_id = s.last_job_id AND j.scope_id = s.scope_id"
            " AND j.source_id = s.source_id), EXISTS (SELECT 1 FROM source_versions v"
            " WHERE v.scope_id = s.scope_id AND v.source_id = s.source_id)"
            " FROM sources s ORDER BY 1, 2"
        )
        async for rows in self._tx.pages(sql, page):
            yield [ScanSourceRow(r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5])) for r in rows]

    async def jobs(self, page: int) -> AsyncIterator[list[ScanJob]]:
        """Every job, by ``job_id``."""
        async for rows in self._tx.pages(f"SELECT {_JOB} FROM jobs j ORDER BY 1", page):
            yield [ScanJob(*r) for r in rows]

    async def jobs_at(self, job_ids: Sequence[bytes]) -> list[ScanJob]:
        """The jobs with these ids."""
        rows = await self._by_job(job_ids, "j.job_id", f"SELECT {_JOB} FROM jobs j WHERE {{ids}}")
        return [ScanJob(*r) for r in rows]

    async def job_events(self, job_ids: Sequence[bytes]) -> list[ScanEvent]:
        """Every event of these jobs, by ``(job_id, seq)``."""
        select = "SELECT job_id, seq, transition, detail FROM job_events WHERE {ids} ORDER BY 1, 2"
        return [ScanEvent(*r) for r in await self._by_job(job_ids, "job_id", select)]

    async def search_index(self, limit: int) -> SearchProblems:
        """The full-text index against the span rows (:func:`.search_scan.search_problems`),
        at most ``limit`` example keys per kind."""
        return await search_problems(self._tx, limit)
