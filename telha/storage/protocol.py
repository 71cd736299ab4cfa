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

from telha.domain.chunking import MAX_CHUNKED_TEXT_BYTES
from telha.domain.model import (
    Direction,
    EdgeRecord,
    NodeVersion,
    Scope,
    SourceVersion,
    SpanRecord,
)
from telha.domain.row_faults import RowFault
from telha.storage.core.diff import VersionDiff
from telha.storage.core.scan import Scan
from telha.storage.core.text_reads import ChunkInputs, TextWindow
from telha.storage.job_watch import JobEventSignal
from telha.storage.protocol_composed import ComposedAggregates
from telha.storage.protocol_connectors import ConnectorStore
from telha.storage.protocol_erasure import ErasureStore
from telha.storage.protocol_jobs import JobStore
from telha.storage.protocol_keys import KeyStore
from telha.storage.protocol_lifecycle import QuotaStore, RetentionStore, WebhookStore
from telha.storage.protocol_listings import ListStore
from telha.storage.protocol_raw import RawStore
from telha.storage.protocol_search import SearchStore
from telha.storage.protocol_versions import VersionStore

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
        writing (:meth:`telha.storage.core.failed_rows.RowFaultOps.fail_row`)."""


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


class ReadStore(Protocol):
    """Reading what was ingested, within one scope: the REST read API, and the Eraser resolving
    what a request names."""

    async def source_versions(self, scope: Scope, source_id: bytes) -> list[SourceVersion]:
        """All versions of a source, newest first; empty when the source is unknown."""

    async def read_text(
        self, scope: Scope, source_id: bytes, tx: int, start: int | None, end: int | None
    ) -> bytes:
        """Canonical text bytes ``[start, end)`` of one version (the slice API).

        :raises NotFound: no such version in ``scope``.
        :raises RequestError: range outside the text or not on UTF-8 boundaries.
        """

    async def span_rows(self, scope: Scope, source_id: bytes, tx: int) -> list[SpanRecord]:
        """The span reverse index of one version in document order.

        :raises NotFound: no such version in ``scope``.
        """

    async def get_node(
        self,
        scope: Scope,
        node_id: bytes,
        as_of: int | None,
        principals: tuple[str, ...] | None = None,
    ) -> NodeVersion | None:
        """The node version current at transaction time ``as_of`` (µs; ``None`` = now);
        with ``principals``, ``None`` when its source's ACL admits none of them."""

    async def list_nodes(
        self,
        scope: Scope,
        *,
        label: str | None,
        source_id: bytes | None,
        limit: int,
        after: bytes | None,
        as_of: int | None = None,
        principals: tuple[str, ...] | None = None,
    ) -> list[NodeVersion]:
        """Nodes (current, or as of transaction time ``as_of``) ordered by id, strictly
        after ``after``, at most ``limit``; with ``principals``, of the sources whose ACL
        admits one of them only (docs/rest-api.md, "Principals")."""

    async def node_edges(
        self,
        scope: Scope,
        node_id: bytes,
        direction: Direction,
        as_of: int | None = None,
        principals: tuple[str, ...] | None = None,
    ) -> list[EdgeRecord]:
        """Edges of a node (current, or as of ``as_of``) whose far endpoint is in the graph
        then (dangling edges are left out), and with ``principals`` of a source whose ACL
        admits one of them."""

    async def source_admitted(
        self, scope: Scope, source_id: bytes, principals: tuple[str, ...] | None
    ) -> bool:
        """Whether a request of ``scope`` acting for ``principals`` sees the source: always
        without principals; else when the source has no ACL or its ACL names one of them
        (:func:`telha.domain.acl.admits`)."""

    async def chunk_inputs(
        self,
        scope: Scope,
        source_id: bytes,
        tx: int,
        max_text_bytes: int = MAX_CHUNKED_TEXT_BYTES,
    ) -> ChunkInputs:
        """One version's text, span rows and node facts, for retrieval chunks.

        :raises NotFound: no such version in ``scope``.
        :raises ContentErased: the version was erased.
        :raises PayloadTooLarge: its text is over ``max_text_bytes``.
        """

    async def text_window(
        self, scope: Scope, source_id: bytes, tx: int, start: int, end: int
    ) -> TextWindow:
        """The stored chunks of one version holding bytes ``[start, end)`` (clamped to the
        text), with the unit counts of the text before them (offset conversion,
        :mod:`telha.domain.units`).

        :raises NotFound: no such version in ``scope``.
        :raises ContentErased: the version was erased.
        """

    async def has_source(self, scope: Scope, source_id: bytes) -> bool:
        """Whether ``scope`` knows the source at all: a version row (finalized or a stream's
        pinned one) or an ingest job of it."""

    async def version_diff(
        self,
        scope: Scope,
        source_id: bytes,
        *,
        from_tx: int | None,
        to_tx: int | None,
        limit: int,
        after: bytes | None,
    ) -> VersionDiff:
        """One page of what changed between two published versions of a source
        (:mod:`telha.storage.core.diff`): at most ``limit`` added, removed or changed nodes
        with ids after ``after``; ``None`` for ``from_tx``/``to_tx`` picks the version
        published before ``to_tx`` / the latest one.

        :raises RequestError: ``from_tx`` is not before ``to_tx``.
        :raises NotFound: no such source, or a tx that is not one of its published versions.
        :raises ContentErased: one of the two versions was erased.
        """


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
    ReadStore,
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
