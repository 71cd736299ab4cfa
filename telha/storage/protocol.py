"""The storage seam: domain operations, one engine package per database (see
``docs/architecture.md``).

Engines own their SQL; everything above these Protocols speaks in :mod:`telha.domain.model`
records. The operations are grouped by role, and each caller names only the roles it uses
(the :class:`~telha.queue.job_queue.JobQueue` a :class:`QueueStore`, the REST read routes a
:class:`ReadStore`, ``telha check`` a :class:`ScanStore`, …). :class:`Storage` is every role
at once, what an engine implements; :class:`StorageEngine` adds the engine's lifecycle.

Engines raise :class:`~telha.domain.errors.StorageError` for driver failures and
:class:`~telha.domain.errors.NotFound` / :class:`~telha.domain.errors.RequestError` where the
caller asked for something that is not there or not addressable. Every write path checks
the erasure blocklist inside its own transaction: a blocklisted commit, enqueue or raw store
writes nothing (:class:`~telha.domain.errors.ContentErased`, ``EnqueueOutcome.erased``,
``CommitOutcome.erased`` or ``StreamOutcome.erased`` with the job ended ``dead``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, Self

import anyio.abc

from telha.domain.row_faults import RowFault
from telha.storage.connectors.role import ConnectorStore
from telha.storage.core.scan import Scan
from telha.storage.erasure.role import ErasureStore
from telha.storage.job_watch import JobEventSignal
from telha.storage.jobs.role import JobStore
from telha.storage.keys.role import KeyStore
from telha.storage.listings.role import ListStore
from telha.storage.protocol_composed import ComposedAggregates
from telha.storage.quotas.role import QuotaStore
from telha.storage.raw.role import RawStore
from telha.storage.reads.role import ReadStore
from telha.storage.retention.role import RetentionStore
from telha.storage.search.role import SearchStore
from telha.storage.versions.role import VersionStore
from telha.storage.webhooks.role import WebhookStore

__all__ = [
    "ALL_FORMATS",
    "ConnectorStore",
    "ErasureStore",
    "JobEventStore",
    "JobStore",
    "KeyStore",
    "ListStore",
    "QueueStore",
    "QuotaStore",
    "RawStore",
    "ReadStore",
    "RetentionStore",
    "ScanStore",
    "SearchStore",
    "Storage",
    "StorageEngine",
    "VersionStore",
    "WebhookStore",
]

#: What :meth:`QueueStore.job_wakeups` yields when wake-ups may have been missed (say, its
#: channel reconnected): every format's pollers should look again.
ALL_FORMATS = "*"


class RowFaultStore(Protocol):
    """Stored rows an actor cannot process (docs/architecture.md, "Supervision and bad
    rows")."""

    async def fail_row(self, fault: RowFault, *, now_us: int) -> bool:
        """Record ``fault``'s row failed with its reason (a job: ``dead``, ``corrupt_row``;
        a search entry: marked failed) and log ``row_failed``; ``False`` when nothing needed
        writing (:meth:`telha.storage.core.operations.SharedOps.fail_row`)."""


class QueueStore(RowFaultStore, Protocol):
    """What the :class:`~telha.queue.job_queue.JobQueue` holds: the job aggregate, the
    engine's cross-process wake-ups and the bad-row record."""

    @property
    def jobs(self) -> JobStore:
        """Job rows: enqueue, lease, heartbeat, fail, release, lose, reap, cancel."""

    def job_wakeups(self) -> AsyncIterator[str] | None:
        """Formats whose jobs became available through another process (:data:`ALL_FORMATS`:
        look at every format), for the JobQueue's per-format wake-ups; ``None`` when the engine has
        no such channel (one process: in-process wake-ups see every enqueue)."""


class JobEventStore(Protocol):
    """A job's events as they are written: what the live event stream reads
    (docs/rest-api.md, "Live events")."""

    #: Wakes this process's readers of a job once events of it are committed.
    job_events: JobEventSignal

    @property
    def jobs(self) -> JobStore:
        """The job aggregate: the events themselves (``events_after``)."""


class ScanStore(Protocol):
    """Whole-store reads across every scope, for ``telha check``: a consistent snapshot and the
    erasure leftovers counted beside it (``erasure.leftovers``)."""

    @property
    def erasure(self) -> ErasureStore:
        """The erasure aggregate (its leftovers)."""

    def scan(self) -> AbstractAsyncContextManager[Scan]:
        """A consistent, read-only snapshot of every table for as long as the ``async with``
        block runs (see :class:`~telha.storage.core.scan.Scan`); works on a store opened
        ``readonly`` beside a live server.

        :raises StorageError: the store cannot be read.
        """


class Storage(
    ComposedAggregates,
    QueueStore,
    JobEventStore,
    ScanStore,
    Protocol,
):
    """Every role at once: what an engine implements (the composed aggregates are
    attributes: :class:`~telha.storage.protocol_composed.ComposedAggregates`)."""


class StorageEngine(Storage, Protocol):
    """An engine as the service and tools hold it: the operations plus its lifecycle."""

    @property
    def location(self) -> str:
        """Where the data lives, for logs (a file path, or a DSN without its password)."""

    async def run(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        """Actor body: open, report the store as started, serve until cancelled, close."""

    def channel_statistics(self) -> dict[str, Any]:
        """``{name: anyio MemoryObjectStreamStatistics}`` of the engine's bounded channels,
        for ``/metrics`` (empty when it has none, or while closed)."""

    def writers_waiting(self) -> int:
        """Tasks waiting to write now (SQLite: for its one writer; PostgreSQL: for a pooled
        connection), for ``/metrics``."""

    async def __aenter__(self) -> Self:
        """Open (and migrate) for short-lived use."""

    async def __aexit__(self, *exc: object) -> None:
        """Close."""
