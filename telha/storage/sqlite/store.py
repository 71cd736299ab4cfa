"""The SQLite storage engine and its actor (DESIGN.md §4): one writer, a pool of WAL readers.

Writes are serialised by one lock over the single writer connection; each write is one
``BEGIN IMMEDIATE`` transaction, so a failure leaves nothing behind. This module holds the
actor and the version commit (spec 004 apply_parts); reads and jobs are mixins beside it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import anyio
import anyio.abc

from telha.domain.erasure import BLOCKED_REASON, ERASED_MESSAGE
from telha.domain.errors import ContentErased, OutOfSync
from telha.domain.ids import blob_id_for, content_hash, now_us
from telha.domain.model import CommitOutcome, Dedup, JobCompletion, NewVersion, Scope
from telha.domain.projection import Projection
from telha.domain.records import is_duplicate
from telha.offload import off_loop
from telha.storage.core.erasure import ErasureOps
from telha.storage.core.jobs import JobOps
from telha.storage.sqlite.base import _nothing, blocked, latest_hashes
from telha.storage.sqlite.checkpointer import Checkpointer
from telha.storage.sqlite.jobs import (
    abandon_stream,
    check_lease,
    complete_tx,
    end_erased,
    load_continuation,
)
from telha.storage.sqlite.raw import RawMixin
from telha.storage.sqlite.reads import VERSION_COLS, ReadsMixin
from telha.storage.sqlite.rows import build_rows, current_nodes, insert_rows
from telha.storage.sqlite.scan import ScanMixin
from telha.storage.sqlite.streams import StreamsMixin

__all__ = ["SqliteStore"]


class SqliteStore(ReadsMixin, JobOps, StreamsMixin, RawMixin, ScanMixin, ErasureOps):
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

    def job_wakeups(self) -> None:
        """No cross-process wake-ups: one ``telha serve`` owns an SQLite file, and its
        in-process wake-ups see every enqueue (see :meth:`Storage.job_wakeups`)."""
        return None

    async def insert_api_key(self, scope: Scope, key_id: str, key_hash: bytes) -> None:
        """See :meth:`telha.storage.protocol.Storage.insert_api_key`."""

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO api_keys (key_hash, key_id, scope_id, created_at) VALUES (?, ?, ?, ?)",
                (key_hash, key_id, self._tx_scope_id(conn, scope), now_us()),
            )

        await self._write("store api key", tx)

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
        text = projection.canonical
        canonical_hash = await off_loop(len(text), content_hash, text)
        blob_id = blob_id_for(canonical_hash).bytes

        def tx(conn: sqlite3.Connection) -> CommitOutcome:
            if completion is not None:
                check_lease(conn, completion.lease)
                cont = load_continuation(conn, completion.lease.job_id)
                if cont is not None and (cont.worker_id, cont.lease_generation) == (
                    completion.worker_id,
                    completion.lease.lease_generation,
                ):
                    raise OutOfSync(f"a stream is open: expected seq {cont.next_seq}, got 0")
                # A single-shot retry of a job whose earlier attempt streamed: close that.
                abandon_stream(conn, completion.lease.job_id, completion.now_us)
            sid = self._tx_scope_id(conn, scope)
            if blocked(conn, sid, (version.content_hash, canonical_hash)):
                if completion is None:
                    raise ContentErased(ERASED_MESSAGE)
                end_erased(conn, completion.lease.job_id, completion.now_us, BLOCKED_REASON)
                return CommitOutcome(False, None, [], [], erased=True)
            if _is_duplicate(conn, sid, version, canonical_hash, dedup):
                if completion is None:
                    conn.execute("ROLLBACK")  # nothing to write
                else:  # a duplicate writes no rows: no children either (spec 004 step 2)
                    complete_tx(conn, sid, replace(completion, children=()), "deduplicated")
                return CommitOutcome(True, None, [], [])
            tx_time = self._clock.next()
            explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
            existing = current_nodes(conn, sid, explicit) if explicit else {}
            rows = build_rows(sid, version.source_id, tx_time, blob_id, projection, existing)
            _insert_version(conn, sid, tx_time, version, canonical_hash, blob_id, len(text))
            insert_rows(conn, rows)
            refused: tuple[str, ...] = ()
            if completion is not None:
                detail = f"version={tx_time} nodes={len(rows.node_ids)}"
                refused = complete_tx(conn, sid, completion, detail)
            return CommitOutcome(
                False, tx_time, rows.node_ids, rows.edge_ids, refused_children=refused
            )

        return await self._write("commit version", tx)


def _is_duplicate(
    conn: sqlite3.Connection, sid: int, v: NewVersion, canonical_hash: bytes, dedup: Dedup
) -> bool:
    if dedup is Dedup.NONE:
        return False
    return is_duplicate(latest_hashes(conn, sid, v.source_id), v, canonical_hash, dedup)


def _insert_version(
    conn: sqlite3.Connection,
    sid: int,
    tx: int,
    v: NewVersion,
    canonical_hash: bytes,
    blob_id: bytes,
    text_len: int,
) -> None:
    conn.execute(
        f"INSERT INTO source_versions (scope_id, {VERSION_COLS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (sid, v.source_id, tx, v.name, v.format, v.content_hash, canonical_hash, v.size,
         v.worker, v.job_id, blob_id, text_len),
    )  # fmt: skip
