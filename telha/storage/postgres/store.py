"""The PostgreSQL storage engine and its actor: several ``telha serve`` replicas on one
database.

Each operation is one transaction on a pooled connection; what must not interleave across
replicas is ordered by locks taken inside it (job rows, ``(scope, source)`` advisory locks,
the clock row, in that order). The actor also holds one extra connection that ``LISTEN``\\s on
:data:`~telha.storage.postgres.tx.CHANNEL`, so a job made available by any replica wakes this
replica's pollers at once (:meth:`PostgresStore.job_wakeups`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import cached_property
from typing import Any

import anyio
import anyio.abc
import asyncpg
import structlog

from telha.storage.core.operations import SharedOps
from telha.storage.postgres.base import PgBase
from telha.storage.postgres.fast import FastJobs, FastVersions
from telha.storage.postgres.statistics import FirstAnalyze
from telha.storage.postgres.tx import CHANNEL
from telha.storage.protocol import ALL_FORMATS

__all__ = ["PostgresStore"]

log = structlog.get_logger("telha.storage")

_RECONNECT_S = (0.1, 0.5, 1.0, 2.0, 5.0)


class PostgresStore(SharedOps, PgBase):
    """PostgreSQL implementation of :class:`telha.storage.protocol.Storage`.

    Use as an actor (``await tg.start(store.run)`` reports the opened store; it also listens
    for wake-ups) or, in short-lived tools, as ``async with PostgresStore(dsn) as store``.

    :param dsn: a libpq connection string.
    :param pool_size: pooled connections of this process (plus one LISTEN connection).
    :param readonly: no migrations, read-only sessions (``telha check``).
    """

    def __init__(
        self, dsn: str, *, pool_size: int = 10, readonly: bool = False, search: bool = True
    ) -> None:
        super().__init__(dsn, pool_size=pool_size, readonly=readonly, search=search)
        self._woken: set[str] = set()
        self._woken_event = anyio.Event()

    @cached_property
    def jobs(self) -> FastJobs:
        """The job aggregate with enqueue and lease as one function call each
        (:class:`~telha.storage.postgres.fast.FastJobs`)."""
        return FastJobs(self)

    @cached_property
    def versions(self) -> FastVersions:
        """The version aggregate with a source's first single-shot commit as one function
        call (:class:`~telha.storage.postgres.fast.FastVersions`)."""
        return FastVersions(self)

    async def run(self, *, task_status: anyio.abc.TaskStatus[PostgresStore]) -> None:
        """Actor body: open (migrating), start the LISTEN connection and the first
        ``ANALYZE`` of new tables (:class:`~telha.storage.postgres.statistics.FirstAnalyze`),
        report ``self``, wait for cancellation, close the pool (shielded).

        :raises StorageError: the database cannot be reached or migrated at start.
        """
        await self.open()
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._listen)
                await tg.start(FirstAnalyze(self._require_pool()).run)
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
