"""The SQLite storage engine and its actor (DESIGN.md §4): one writer, a pool of WAL readers.

Writes are serialised by one lock over the single writer connection; each write is one
``BEGIN IMMEDIATE`` transaction, so a failure leaves nothing behind. This module holds the
actor and the version commit (spec 004 apply_parts); reads and jobs are mixins beside it.
"""

from __future__ import annotations

import aiosqlite
import anyio
import anyio.abc

from telha.ids import blob_id_for, content_hash, now_us
from telha.ingest.projection import Projection
from telha.model import CommitOutcome, Dedup, JobCompletion, NewVersion, Scope
from telha.storage.sqlite.base import _nothing
from telha.storage.sqlite.checkpointer import Checkpointer
from telha.storage.sqlite.jobs import JobsMixin, add_event, check_lease
from telha.storage.sqlite.reads import VERSION_COLS, ReadsMixin
from telha.storage.sqlite.rows import VersionRows, build_rows

__all__ = ["SqliteStore"]


class SqliteStore(ReadsMixin, JobsMixin):
    """SQLite implementation of :class:`telha.storage.protocol.Storage`.

    Use as an actor (``await tg.start(store.run)`` reports the opened store) or, in short-lived
    tools, as ``async with SqliteStore(path) as store``.
    """

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

    async def insert_api_key(self, scope: Scope, key_id: str, key_hash: bytes) -> None:
        """See :meth:`telha.storage.protocol.Storage.insert_api_key`."""
        async with self._transaction("store api key") as w:
            sid = await self._scope_id(scope, create=True)
            await w.execute(
                "INSERT INTO api_keys (key_hash, key_id, scope_id, created_at) VALUES (?, ?, ?, ?)",
                (key_hash, key_id, sid, now_us()),
            )

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
        async with self._transaction("commit version") as w:
            if completion is not None:
                await check_lease(w, completion.lease)
            sid = await self._scope_id(scope, create=True)
            assert sid is not None
            if await self._is_duplicate(w, sid, version, canonical_hash, dedup):
                if completion is None:
                    await w.execute("ROLLBACK")  # nothing to write
                else:
                    await self._complete_job(w, sid, completion, "deduplicated")
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
        return CommitOutcome(False, tx, rows.node_ids, rows.edge_ids)

    async def _is_duplicate(
        self,
        w: aiosqlite.Connection,
        sid: int,
        v: NewVersion,
        canonical_hash: bytes,
        dedup: Dedup,
    ) -> bool:
        if dedup is Dedup.NONE:
            return False
        latest = await self._latest_hashes(w, sid, v.source_id)
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
            f"INSERT INTO source_versions (scope_id, {VERSION_COLS})"
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
