"""The PostgreSQL storage engine and its actor (DESIGN.md §4, §9): several ``telha serve``
replicas on one database.

Each operation is one transaction on a pooled connection; what must not interleave across
replicas is ordered by locks taken inside it (job rows, ``(scope, source)`` advisory locks,
the clock row, in that order). The actor also holds one extra connection that ``LISTEN``\\s on
:data:`~telha.storage.postgres.jobs.CHANNEL`, so a job made available by any replica wakes this
replica's pollers at once (:meth:`PostgresStore.job_wakeups`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
import anyio.abc
import asyncpg
import structlog

from telha.domain.erasure import BLOCKED_REASON, ERASED_MESSAGE
from telha.domain.errors import ContentErased, OutOfSync, StaleLease
from telha.domain.ids import blob_id_for, content_hash, now_us
from telha.domain.model import CommitOutcome, Dedup, JobCompletion, NewVersion, Scope
from telha.domain.projection import Projection
from telha.domain.records import is_duplicate
from telha.domain.rows import build_rows
from telha.offload import off_loop
from telha.storage.core.erasure import ErasureOps
from telha.storage.postgres.base import Conn, Rollback, blocked, source_lock_key
from telha.storage.postgres.fast import FastJobOps
from telha.storage.postgres.jobs import (
    abandon_stream,
    complete_in_batch,
    complete_tx,
    decode_continuation,
    end_erased,
)
from telha.storage.postgres.raw import RawMixin
from telha.storage.postgres.reads import VERSION_COLS, ReadsMixin
from telha.storage.postgres.rows import PENDING_TX, TX, Batch, add_rows, current_nodes
from telha.storage.postgres.scan import ScanMixin
from telha.storage.postgres.streams import StreamsMixin
from telha.storage.postgres.tx import CHANNEL
from telha.storage.protocol import ALL_FORMATS

__all__ = ["PostgresStore"]

log = structlog.get_logger("telha.storage")

_RECONNECT_S = (0.1, 0.5, 1.0, 2.0, 5.0)


class PostgresStore(ReadsMixin, FastJobOps, StreamsMixin, RawMixin, ScanMixin, ErasureOps):
    """PostgreSQL implementation of :class:`telha.storage.protocol.Storage`.

    Use as an actor (``await tg.start(store.run)`` reports the opened store; it also listens
    for wake-ups) or, in short-lived tools, as ``async with PostgresStore(dsn) as store``.

    :param dsn: a libpq connection string.
    :param pool_size: pooled connections of this process (plus one LISTEN connection).
    :param readonly: no migrations, read-only sessions (``telha check``).
    """

    def __init__(self, dsn: str, *, pool_size: int = 10, readonly: bool = False) -> None:
        super().__init__(dsn, pool_size=pool_size, readonly=readonly)
        self._woken: set[str] = set()
        self._woken_event = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[PostgresStore]) -> None:
        """Actor body: open (migrating), start the LISTEN connection, report ``self``, wait
        for cancellation, close the pool (shielded).

        :raises StorageError: the database cannot be reached or migrated at start.
        """
        await self.open()
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._listen)
                task_status.started(self)
                await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await self.close()

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        # The set is bounded by the number of distinct formats; a burst coalesces.
        self._woken.add(str(payload))
        self._woken_event.set()

    async def _listen(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Keep one connection LISTENing; after a lost connection, reconnect with backoff and
        wake every poller (notifications sent meanwhile were not seen)."""
        failures = 0
        started = False
        while True:
            lost = anyio.Event()
            try:
                conn = await asyncpg.connect(self.dsn)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
                log.warning("listen_connect_failed", error=str(exc))
                if not started:
                    task_status.started()
                    started = True
                await anyio.sleep(_RECONNECT_S[min(failures, len(_RECONNECT_S) - 1)])
                failures += 1
                continue
            try:
                conn.add_termination_listener(lambda _c, lost=lost: lost.set())
                await conn.add_listener(CHANNEL, self._on_notify)
                if failures:
                    self._on_notify(conn, 0, CHANNEL, ALL_FORMATS)
                failures = 0
                if not started:
                    task_status.started()
                    started = True
                await lost.wait()
                log.warning("listen_connection_lost")
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
                log.warning("listen_failed", error=str(exc))
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await conn.close()
            failures += 1
            await anyio.sleep(_RECONNECT_S[0])

    async def job_wakeups(self) -> AsyncIterator[str]:
        """Formats whose jobs became available in any replica (this one included), as
        ``NOTIFY`` delivers them; :data:`ALL_FORMATS` after a LISTEN reconnect. Runs until
        cancelled; one consumer (the JobQueue)."""
        while True:
            await self._woken_event.wait()
            self._woken_event = anyio.Event()
            formats, self._woken = self._woken, set()
            for fmt in sorted(formats):
                yield fmt

    async def insert_api_key(self, scope: Scope, key_id: str, key_hash: bytes) -> None:
        """See :meth:`telha.storage.protocol.Storage.insert_api_key`."""
        sid = await self._ensure_scope(scope)

        async def tx(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO api_keys (key_hash, key_id, scope_id, created_at)"
                " VALUES ($1, $2, $3, $4)",
                key_hash,
                key_id,
                sid,
                now_us(),
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
        """See :meth:`telha.storage.protocol.Storage.commit_version`.

        Locks, in order: the job row (the lease fence), the ``(scope, source)`` advisory locks
        of the version and its child jobs (dedup), the clock row (the transaction time). A
        concurrent commit of the same bytes waits on the advisory lock and then finds this
        version, so exactly one is written. A single-shot submission without children takes
        the same locks and writes in one call (``telha_commit_single``); the rest (and the
        cases that call leaves here) run as one transaction of several statements.
        """
        text = projection.canonical
        canonical_hash = await off_loop(len(text), content_hash, text)
        blob_id = blob_id_for(canonical_hash).bytes
        sid = await self._ensure_scope(scope)
        if completion is not None and not completion.children and dedup is Dedup.SUBMIT:
            single = await self._commit_single(
                sid, version, projection, canonical_hash, blob_id, completion
            )
            if single is not None:
                return single

        async def tx(conn: Conn) -> CommitOutcome:
            children = completion.children if completion is not None else ()
            sources = (version.source_id, *(c.source_id for c in children))
            lease = completion.lease if completion is not None else None
            # telha_commit_check (migration 0002): the lease fence (job row locked), the
            # sources' advisory locks, then the latest version, in one round trip.
            check = await conn.fetchrow(
                "SELECT held, continuation, latest_hash, latest_canonical, latest_job"
                " FROM telha_commit_check($1, $2, $3, $4, $5)",
                lease.job_id if lease is not None else None,
                lease.lease_generation if lease is not None else 0,
                [source_lock_key(sid, source) for source in sources],
                sid,
                version.source_id,
            )
            assert check is not None
            if not check[0]:
                raise StaleLease("job is not leased under this lease generation")
            if completion is not None:
                blob = check[1]
                cont = decode_continuation(blob) if blob is not None else None
                if cont is not None and (cont.worker_id, cont.lease_generation) == (
                    completion.worker_id,
                    completion.lease.lease_generation,
                ):
                    raise OutOfSync(f"a stream is open: expected seq {cont.next_seq}, got 0")
                # A single-shot retry of a job whose earlier attempt streamed: close that.
                await abandon_stream(conn, completion.lease.job_id, completion.now_us, blob)
            if await blocked(conn, sid, (version.content_hash, canonical_hash)):
                if completion is None:
                    raise ContentErased(ERASED_MESSAGE)
                await end_erased(conn, completion.lease.job_id, completion.now_us, BLOCKED_REASON)
                return CommitOutcome(False, None, [], [], erased=True)
            latest = (check[2], check[3], check[4]) if check[2] is not None else None
            if is_duplicate(latest, version, canonical_hash, dedup):
                if completion is None:
                    raise Rollback(CommitOutcome(True, None, [], []))
                # A duplicate writes no rows: no children either (spec 004 step 2).
                await complete_tx(conn, sid, replace(completion, children=()), "deduplicated")
                return CommitOutcome(True, None, [], [])
            explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
            existing = await current_nodes(conn, sid, explicit) if explicit else {}
            # Rows are built before the transaction time exists; the one statement that writes
            # them takes it from the clock row (locked from there to the commit only).
            rows = build_rows(sid, version.source_id, PENDING_TX, blob_id, projection, existing)
            batch = Batch(take_tx=True)
            _insert_version(batch, sid, version, canonical_hash, blob_id, len(text))
            add_rows(batch, rows)
            nodes = f"nodes={len(rows.node_ids)}"
            if completion is not None and not completion.children and dedup is Dedup.SUBMIT:
                complete_in_batch(batch, completion, f"'version=' || {TX} || ' {nodes}'")
            tx_time = await batch.run(conn)
            assert tx_time is not None
            refused: tuple[str, ...] = ()
            if completion is not None and completion.children:
                refused = await complete_tx(conn, sid, completion, f"version={tx_time} {nodes}")
            return CommitOutcome(
                False, tx_time, rows.node_ids, rows.edge_ids, refused_children=refused
            )

        return await self._write("commit version", tx)

    async def _commit_single(
        self,
        sid: int,
        version: NewVersion,
        projection: Projection,
        canonical_hash: bytes,
        blob_id: bytes,
        completion: JobCompletion,
    ) -> CommitOutcome | None:
        """The common single-shot submission (no children) in one round trip:
        ``telha_commit_single`` (migration 0005) takes the general path's locks in its order
        and writes the rows built here, assuming no explicit node id exists yet. ``None``
        (nothing written) when the case needs the general path: a stream checkpoint, a
        duplicate, blocklisted content, an explicit node id that exists.

        :raises StaleLease: the job is not leased under the completion's generation.
        """
        rows = build_rows(sid, version.source_id, PENDING_TX, blob_id, projection, {})
        assert not rows.closes
        explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
        lease = completion.lease
        args = (
            lease.job_id, lease.lease_generation,
            [source_lock_key(sid, version.source_id)], sid, version.source_id, explicit,
            completion.now_us, completion.stats, f" nodes={len(rows.node_ids)}",
            version.name, version.format, version.content_hash, canonical_hash, version.size,
            version.worker, version.job_id, blob_id, len(projection.canonical),
            *_columns(rows.chunks, 2, 3),
            *_columns(rows.nodes, 1, 3, 4, 5, 6, 7, 8),
            *_columns(rows.labels, 1, 2),
            *_columns(rows.edges, 1, 3, 4, 5, 6),
            *_columns(rows.spans, 1, 3, 4, 5, 6),
            *_columns(rows.ambiguities, 1, 3, 4, 5, 6, 7, 8),
        )  # fmt: skip

        async def one(conn: Conn) -> tuple[str, int | None]:
            row = await conn.fetchrow(_COMMIT_SINGLE, *args)
            assert row is not None
            return str(row[0]), row[1]

        outcome, tx_time = await self._write("commit version", one, transaction=False)
        if outcome == "stale":
            raise StaleLease("job is not leased under this lease generation")
        if outcome != "committed":
            return None
        assert tx_time is not None
        return CommitOutcome(False, int(tx_time), rows.node_ids, rows.edge_ids)


#: The call of ``telha_commit_single``: its 46 parameters, in :meth:`_commit_single`'s order.
_COMMIT_SINGLE = (
    f"SELECT outcome, tx FROM telha_commit_single({', '.join(f'${i}' for i in range(1, 47))})"
)


def _columns(rows: list[tuple[Any, ...]], *indexes: int) -> list[list[Any]]:
    """Columns ``indexes`` of ``rows``, one list each (the arrays a function unnests)."""
    return [[row[i] for row in rows] for i in indexes]


def _insert_version(
    batch: Batch, sid: int, v: NewVersion, canonical_hash: bytes, blob_id: bytes, text_len: int
) -> None:
    values = [
        (sid, "integer"), (v.source_id, "bytea"), None, (v.name, "text"), (v.format, "text"),
        (v.content_hash, "bytea"), (canonical_hash, "bytea"), (v.size, "bigint"),
        (v.worker, "text"), (v.job_id, "bytea"), (blob_id, "bytea"), (text_len, "bigint"),
    ]  # fmt: skip
    marks = ", ".join(TX if item is None else batch.param(*item) for item in values)
    batch.statement(f"INSERT INTO source_versions (scope_id, {VERSION_COLS}) VALUES ({marks})")
