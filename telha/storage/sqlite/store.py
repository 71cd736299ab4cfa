"""The SQLite storage engine and its actor (DESIGN.md §4): one writer, a pool of WAL readers.

Writes are serialised by one lock over the single writer connection; each write is one
``BEGIN IMMEDIATE`` transaction, so a failure leaves nothing behind. Reads take a connection
from a bounded pool of read-only connections.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import aiosqlite
import anyio
import msgspec

from telha.errors import NotFound, RequestError, StorageError
from telha.ids import TxClock, blob_id_for, content_hash, now_us
from telha.ingest.projection import Projection
from telha.model import (
    BLOB_CHUNK,
    CommitOutcome,
    Dedup,
    Direction,
    EdgeRecord,
    JobCompletion,
    NewVersion,
    NodeVersion,
    ProvenanceSpan,
    Scope,
    SourceVersion,
    SpanRecord,
)
from telha.storage.sqlite.checkpointer import Checkpointer
from telha.storage.sqlite.jobs import JobsMixin, add_event, check_lease
from telha.storage.sqlite.migrate import apply_migrations
from telha.storage.sqlite.rows import VersionRows, build_rows

__all__ = ["SqliteStore"]

_VERSION_COLS = (
    "source_id, tx, name, format, content_hash, canonical_text_hash, size, worker, job_id,"
    " blob_id, text_len"
)
_NODE_COLS = "n.node_id, n.labels, n.properties, n.tx_from, n.tx_to, n.valid_from, n.valid_to,"
_NODE_COLS += " n.provenance"
_decode = msgspec.json.decode
#: WAL size (pages) at which the committing connection checkpoints itself, should the
#: Checkpointer fall behind.
_AUTOCHECKPOINT_PAGES = 16384


def _nothing() -> None:
    pass


def _version(row: Iterable[Any]) -> SourceVersion:
    return SourceVersion(*row)


def _node(row: tuple[Any, ...]) -> NodeVersion:
    node_id, labels, props, tx_from, tx_to, valid_from, valid_to, prov = row
    spans = [ProvenanceSpan(uuid.UUID(s).bytes, t, a, b) for s, t, a, b in _decode(prov)]
    return NodeVersion(
        node_id, _decode(labels), _decode(props), tx_from, tx_to, valid_from, valid_to, spans
    )


def _is_boundary(text: bytes, pos: int) -> bool:
    """True when byte offset ``pos`` of ``text`` is not inside a UTF-8 sequence."""
    return pos >= len(text) or (text[pos] & 0xC0) != 0x80


class SqliteStore(JobsMixin):
    """SQLite implementation of :class:`telha.storage.protocol.Storage`.

    Use as an actor (``await tg.start(store.run)`` reports the opened store) or, in short-lived
    tools, as ``async with SqliteStore(path) as store``.

    :param path: the database file; its folder is created if missing.
    :param synchronous: ``"normal"`` (WAL default) or ``"full"``.
    :param readers: size of the read connection pool.
    """

    def __init__(
        self, path: Path, *, synchronous: Literal["normal", "full"] = "normal", readers: int = 2
    ) -> None:
        self.path = path
        self._synchronous = synchronous.upper()
        self._n_readers = readers
        self._writer: aiosqlite.Connection | None = None
        self._write_lock = anyio.Lock()
        self._pool_send: Any = None
        self._pool_recv: Any = None
        self._readers: list[aiosqlite.Connection] = []
        self._scopes: dict[Scope, int] = {}
        self._clock = TxClock()
        self._on_commit: Callable[[], None] = _nothing

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the writer, apply migrations, load the clock, open the readers."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._writer = await self._connect(readonly=False)
            await self._writer.execute("PRAGMA journal_mode=WAL")
            # Backstop only: the Checkpointer actor checkpoints off the write path.
            await self._writer.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT_PAGES}")
            await apply_migrations(self._writer)
            self._clock = TxClock(await self._max_tx())
            self._pool_send, self._pool_recv = anyio.create_memory_object_stream[
                aiosqlite.Connection
            ](self._n_readers)
            for _ in range(self._n_readers):
                conn = await self._connect(readonly=True)
                self._readers.append(conn)
                self._pool_send.send_nowait(conn)
        except sqlite3.Error as exc:
            await self.close()
            raise StorageError(f"cannot open {self.path}: {exc}") from exc

    async def close(self) -> None:
        """Close every connection; an open write transaction is rolled back by SQLite."""
        for conn in self._readers:
            await conn.close()
        self._readers.clear()
        if self._pool_send is not None:
            self._pool_send.close()
            self._pool_recv.close()
            self._pool_send = self._pool_recv = None
        if self._writer is not None:
            await self._writer.close()
            self._writer = None

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            await self.close()

    async def run(self, *, task_status: anyio.abc.TaskStatus[SqliteStore]) -> None:
        """Actor body: open, start the WAL checkpointer, report ``self`` as started, wait for
        cancellation, close (shielded, after the writer lock is free so no transaction is cut
        in half)."""
        await self.open()
        try:
            async with anyio.create_task_group() as tg:
                checkpointer = Checkpointer(self.path)
                await tg.start(checkpointer.run)
                self._on_commit = checkpointer.committed
                task_status.started(self)
                await anyio.sleep_forever()
        finally:
            self._on_commit = _nothing
            with anyio.CancelScope(shield=True):
                async with self._write_lock:
                    await self.close()

    async def _connect(self, *, readonly: bool) -> aiosqlite.Connection:
        if readonly:
            conn = await aiosqlite.connect(
                f"file:{self.path}?mode=ro", uri=True, isolation_level=None
            )
        else:
            conn = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            await conn.execute("PRAGMA busy_timeout=5000")
            await conn.execute(f"PRAGMA synchronous={self._synchronous}")
            await conn.execute("PRAGMA foreign_keys=ON")
            # A 2.3 MB JSON batch dirties ~10 MB of pages: keep them in memory until COMMIT.
            await conn.execute("PRAGMA cache_size=-65536")
        except BaseException:
            # Not a database (or unreadable): close, or its thread keeps the process alive.
            with anyio.CancelScope(shield=True):
                await conn.close()
            raise
        return conn

    async def _max_tx(self) -> int:
        assert self._writer is not None
        sql = (
            "SELECT max(coalesce((SELECT max(tx) FROM source_versions), 0),"
            " coalesce((SELECT max(tx_from) FROM nodes), 0),"
            " coalesce((SELECT max(tx_to) FROM nodes), 0),"
            " coalesce((SELECT max(tx_from) FROM edges), 0))"
        )
        async with self._writer.execute(sql) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[aiosqlite.Connection]:
        if self._pool_recv is None:
            raise StorageError("store is not open")
        conn = await self._pool_recv.receive()
        try:
            yield conn
        except sqlite3.Error as exc:
            raise StorageError(f"read failed: {exc}") from exc
        finally:
            self._pool_send.send_nowait(conn)

    async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._reader() as conn, conn.execute(sql, params) as cur:
            return [tuple(r) for r in await cur.fetchall()]

    # -- scopes and keys -------------------------------------------------------------------

    async def _scope_id(self, scope: Scope, *, create: bool) -> int | None:
        """The interned id of ``scope``; with ``create``, inserted inside the caller's open write
        transaction. Only ids read back from committed data are cached, so a rolled-back insert
        never leaves a stale id behind."""
        cached = self._scopes.get(scope)
        if cached is not None:
            return cached
        sql = "SELECT scope_id FROM scopes WHERE tenant_id = ? AND organization_id = ?"
        params = (scope.tenant_id, scope.organization_id)
        if create:
            w = self._require_writer()
            await w.execute(
                "INSERT OR IGNORE INTO scopes (tenant_id, organization_id) VALUES (?, ?)", params
            )
            async with w.execute(sql, params) as cur:
                row = await cur.fetchone()
            return int(row[0]) if row else None
        rows = await self._fetchall(sql, params)
        if not rows:
            return None
        self._scopes[scope] = int(rows[0][0])
        return self._scopes[scope]

    async def insert_api_key(self, scope: Scope, key_id: str, key_hash: bytes) -> None:
        """See :meth:`telha.storage.protocol.Storage.insert_api_key`."""
        async with self._write_lock:
            w = self._require_writer()
            try:
                await w.execute("BEGIN IMMEDIATE")
                sid = await self._scope_id(scope, create=True)
                await w.execute(
                    "INSERT INTO api_keys (key_hash, key_id, scope_id, created_at)"
                    " VALUES (?, ?, ?, ?)",
                    (key_hash, key_id, sid, now_us()),
                )
                await w.execute("COMMIT")
            except sqlite3.Error as exc:
                await self._rollback()
                raise StorageError(f"cannot store api key: {exc}") from exc

    async def scope_for_key(self, key_hash: bytes) -> Scope | None:
        """See :meth:`telha.storage.protocol.Storage.scope_for_key`."""
        rows = await self._fetchall(
            "SELECT s.tenant_id, s.organization_id FROM api_keys k"
            " JOIN scopes s ON s.scope_id = k.scope_id"
            " WHERE k.key_hash = ? AND k.revoked_at IS NULL",
            (key_hash,),
        )
        return Scope(rows[0][0], rows[0][1]) if rows else None

    # -- writes ----------------------------------------------------------------------------

    def _require_writer(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise StorageError("store is not open")
        return self._writer

    async def _rollback(self) -> None:
        w = self._writer
        if w is not None and w.in_transaction:
            with anyio.CancelScope(shield=True):
                await w.execute("ROLLBACK")

    async def commit_version(
        self,
        scope: Scope,
        version: NewVersion,
        projection: Projection,
        *,
        dedup: Dedup,
        completion: JobCompletion | None = None,
    ) -> CommitOutcome:
        """See :meth:`telha.storage.protocol.Storage.commit_version`."""
        canonical_hash = await anyio.to_thread.run_sync(content_hash, projection.canonical)
        blob_id = blob_id_for(canonical_hash).bytes
        explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
        async with self._write_lock:
            w = self._require_writer()
            try:
                await w.execute("BEGIN IMMEDIATE")
                if completion is not None:
                    await check_lease(w, completion.lease)
                sid = await self._scope_id(scope, create=True)
                assert sid is not None
                if await self._is_duplicate(w, sid, version, canonical_hash, dedup):
                    if completion is None:
                        await w.execute("ROLLBACK")
                        return CommitOutcome(True, None, [], [])
                    await self._complete_job(w, sid, completion, "deduplicated")
                    await w.execute("COMMIT")
                    self._on_commit()
                    return CommitOutcome(True, None, [], [])
                tx = self._clock.next()
                existing = await self._current_nodes(w, sid, explicit) if explicit else {}
                rows = await anyio.to_thread.run_sync(
                    build_rows, sid, version.source_id, tx, blob_id, projection, existing
                )
                await self._insert_version(w, sid, tx, version, canonical_hash, blob_id, projection)
                await self._insert_rows(w, rows)
                if completion is not None:
                    await self._complete_job(w, sid, completion, None)
                await w.execute("COMMIT")
                self._on_commit()
            except sqlite3.Error as exc:
                await self._rollback()
                raise StorageError(f"cannot commit version: {exc}") from exc
            except BaseException:
                await self._rollback()
                raise
        return CommitOutcome(False, tx, rows.node_ids, rows.edge_ids)

    @staticmethod
    async def _is_duplicate(
        w: aiosqlite.Connection, sid: int, v: NewVersion, canonical_hash: bytes, dedup: Dedup
    ) -> bool:
        if dedup is Dedup.NONE:
            return False
        async with w.execute(
            "SELECT content_hash, canonical_text_hash, job_id FROM source_versions"
            " WHERE scope_id = ? AND source_id = ? ORDER BY tx DESC LIMIT 1",
            (sid, v.source_id),
        ) as cur:
            latest = await cur.fetchone()
        if latest is None or latest[0] != v.content_hash:
            return False
        if dedup is Dedup.CONTENT:
            return True
        # Submit time: a retry of the same job must re-apply (crash recovery), not dedup.
        return bool(latest[1] == canonical_hash and latest[2] != v.job_id)

    @staticmethod
    async def _current_nodes(
        w: aiosqlite.Connection, sid: int, ids: list[bytes]
    ) -> dict[bytes, tuple[str, bytes]]:
        found: dict[bytes, tuple[str, bytes]] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            async with w.execute(
                "SELECT node_id, labels, properties FROM nodes WHERE scope_id = ? AND tx_to IS NULL"
                f" AND node_id IN ({','.join('?' * len(part))})",
                (sid, *part),
            ) as cur:
                for node_id, labels, props in await cur.fetchall():
                    found[node_id] = (labels, props)
        return found

    async def _complete_job(
        self, w: aiosqlite.Connection, sid: int, c: JobCompletion, detail: str | None
    ) -> None:
        await w.execute(
            "UPDATE jobs SET state = 'completed', lease_owner = NULL, lease_deadline = NULL,"
            " stats = ?, updated_at = ? WHERE job_id = ?",
            (c.stats, c.now_us, c.lease.job_id),
        )
        for child in c.children:
            await self._enqueue_in_tx(w, sid, child, c.now_us, parent=c.lease.job_id)
        await add_event(w, c.lease.job_id, c.now_us, "completed", detail)

    async def _insert_version(
        self,
        w: aiosqlite.Connection,
        sid: int,
        tx: int,
        v: NewVersion,
        canonical_hash: bytes,
        blob_id: bytes,
        proj: Projection,
    ) -> None:
        await w.execute(
            f"INSERT INTO source_versions (scope_id, {_VERSION_COLS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sid,
                v.source_id,
                tx,
                v.name,
                v.format,
                v.content_hash,
                canonical_hash,
                v.size,
                v.worker,
                v.job_id,
                blob_id,
                len(proj.canonical),
            ),
        )

    @staticmethod
    async def _insert_rows(w: aiosqlite.Connection, rows: VersionRows) -> None:
        await w.executemany(
            "INSERT OR IGNORE INTO blob_chunks (scope_id, blob_id, idx, data) VALUES (?, ?, ?, ?)",
            rows.chunks,
        )
        for node_id in rows.closes:
            await w.execute(
                "UPDATE nodes SET tx_to = ? WHERE scope_id = ? AND node_id = ? AND tx_to IS NULL",
                (rows.tx, rows.scope_id, node_id),
            )
        await w.executemany(
            "INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance,"
            " source_id, valid_from, valid_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.nodes,
        )
        await w.executemany(
            "INSERT INTO node_labels (scope_id, label, node_id, tx_from) VALUES (?, ?, ?, ?)",
            rows.labels,
        )
        if rows.edges:
            await w.executemany(
                "INSERT INTO edges (scope_id, edge_id, tx_from, type, from_id, to_id, properties)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows.edges,
            )
        await w.executemany(
            'INSERT INTO span_rows (scope_id, source_id, source_version_tx, start, "end", kind,'
            " linked_nodes) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows.spans,
        )

    # -- reads -----------------------------------------------------------------------------

    async def latest_version(self, scope: Scope, source_id: bytes) -> SourceVersion | None:
        """See :meth:`telha.storage.protocol.Storage.latest_version`."""
        versions = await self._versions(scope, source_id, limit=1)
        return versions[0] if versions else None

    async def source_versions(self, scope: Scope, source_id: bytes) -> list[SourceVersion]:
        """See :meth:`telha.storage.protocol.Storage.source_versions`."""
        return await self._versions(scope, source_id, limit=-1)

    async def _versions(self, scope: Scope, source_id: bytes, *, limit: int) -> list[SourceVersion]:
        sid = await self._scope_id(scope, create=False)
        if sid is None:
            return []
        rows = await self._fetchall(
            f"SELECT {_VERSION_COLS} FROM source_versions WHERE scope_id = ? AND source_id = ?"
            " ORDER BY tx DESC LIMIT ?",
            (sid, source_id, limit),
        )
        return [_version(r) for r in rows]

    async def _version_at(
        self, scope: Scope, source_id: bytes, tx: int
    ) -> tuple[int, SourceVersion]:
        sid = await self._scope_id(scope, create=False)
        if sid is not None:
            rows = await self._fetchall(
                f"SELECT {_VERSION_COLS} FROM source_versions"
                " WHERE scope_id = ? AND source_id = ? AND tx = ?",
                (sid, source_id, tx),
            )
            if rows:
                return sid, _version(rows[0])
        raise NotFound("no such source version")

    async def read_text(
        self, scope: Scope, source_id: bytes, tx: int, start: int | None, end: int | None
    ) -> bytes:
        """See :meth:`telha.storage.protocol.Storage.read_text`."""
        sid, version = await self._version_at(scope, source_id, tx)
        length = version.text_len or 0
        lo = 0 if start is None else start
        hi = length if end is None else end
        if not 0 <= lo <= hi <= length:
            raise RequestError(f"range [{lo}, {hi}) is outside the text (0..{length} bytes)")
        if version.blob_id is None or length == 0:
            return b""
        first, last = lo // BLOB_CHUNK, min(hi, length - 1) // BLOB_CHUNK
        rows = await self._fetchall(
            "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ?"
            " AND idx BETWEEN ? AND ? ORDER BY idx",
            (sid, version.blob_id, first, last),
        )
        buf = b"".join(r[0] for r in rows)
        base = first * BLOB_CHUNK
        if not (_is_boundary(buf, lo - base) and _is_boundary(buf, hi - base)):
            raise RequestError(f"range [{lo}, {hi}) is not on UTF-8 character boundaries")
        return buf[lo - base : hi - base]

    async def span_rows(self, scope: Scope, source_id: bytes, tx: int) -> list[SpanRecord]:
        """See :meth:`telha.storage.protocol.Storage.span_rows`."""
        sid, _ = await self._version_at(scope, source_id, tx)
        rows = await self._fetchall(
            'SELECT start, "end", kind, linked_nodes FROM span_rows WHERE scope_id = ?'
            ' AND source_id = ? AND source_version_tx = ? ORDER BY start, "end"',
            (sid, source_id, tx),
        )
        return [
            SpanRecord(s, e, k, [ids[i : i + 16] for i in range(0, len(ids), 16)])
            for s, e, k, ids in rows
        ]

    async def get_node(self, scope: Scope, node_id: bytes, as_of: int | None) -> NodeVersion | None:
        """See :meth:`telha.storage.protocol.Storage.get_node`."""
        sid = await self._scope_id(scope, create=False)
        if sid is None:
            return None
        params: tuple[Any, ...]
        if as_of is None:
            where, params = "n.tx_to IS NULL", (sid, node_id)
        else:
            where = "n.tx_from <= ? AND (n.tx_to IS NULL OR n.tx_to > ?)"
            params = (sid, node_id, as_of, as_of)
        rows = await self._fetchall(
            f"SELECT {_NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.node_id = ? AND {where}"
            " ORDER BY n.tx_from DESC LIMIT 1",
            params,
        )
        return _node(rows[0]) if rows else None

    async def list_nodes(
        self,
        scope: Scope,
        *,
        label: str | None,
        source_id: bytes | None,
        limit: int,
        after: bytes | None,
    ) -> list[NodeVersion]:
        """See :meth:`telha.storage.protocol.Storage.list_nodes`."""
        sid = await self._scope_id(scope, create=False)
        if sid is None:
            return []
        after = after or b""
        if label is not None:
            sql = (
                f"SELECT {_NODE_COLS} FROM node_labels l JOIN nodes n ON n.scope_id = l.scope_id"
                " AND n.node_id = l.node_id AND n.tx_from = l.tx_from"
                " WHERE l.scope_id = ? AND l.label = ? AND l.node_id > ? AND n.tx_to IS NULL"
            )
            params: tuple[Any, ...] = (sid, label, after)
            if source_id is not None:
                sql += " AND n.source_id = ?"
                params += (source_id,)
            sql += " ORDER BY l.node_id LIMIT ?"
        elif source_id is not None:
            sql = (
                f"SELECT {_NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.source_id = ?"
                " AND n.node_id > ? AND n.tx_to IS NULL ORDER BY n.node_id LIMIT ?"
            )
            params = (sid, source_id, after)
        else:
            sql = (
                f"SELECT {_NODE_COLS} FROM nodes n WHERE n.scope_id = ? AND n.node_id > ?"
                " AND n.tx_to IS NULL ORDER BY n.node_id LIMIT ?"
            )
            params = (sid, after)
        return [_node(r) for r in await self._fetchall(sql, (*params, limit))]

    async def node_edges(
        self, scope: Scope, node_id: bytes, direction: Direction
    ) -> list[EdgeRecord]:
        """See :meth:`telha.storage.protocol.Storage.node_edges`."""
        sid = await self._scope_id(scope, create=False)
        if sid is None:
            return []
        live = (
            "EXISTS (SELECT 1 FROM nodes x WHERE x.scope_id = e.scope_id AND x.node_id = {col}"
            " AND x.tx_to IS NULL)"
        )
        parts = []
        params: list[Any] = []
        if direction in (Direction.OUT, Direction.BOTH):
            parts.append(
                "SELECT e.edge_id, e.type, e.from_id, e.to_id, e.properties FROM edges e"
                " WHERE e.scope_id = ? AND e.from_id = ? AND e.tx_to IS NULL AND "
                + live.format(col="e.to_id")
            )
            params += [sid, node_id]
        if direction in (Direction.IN, Direction.BOTH):
            parts.append(
                "SELECT e.edge_id, e.type, e.from_id, e.to_id, e.properties FROM edges e"
                " WHERE e.scope_id = ? AND e.to_id = ? AND e.tx_to IS NULL AND "
                + live.format(col="e.from_id")
            )
            params += [sid, node_id]
        rows = await self._fetchall(" UNION ".join(parts) + " ORDER BY 1", tuple(params))
        return [EdgeRecord(eid, t, f, to, _decode(p)) for eid, t, f, to, p in rows]
