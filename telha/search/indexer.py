"""The search indexer actor (docs/architecture.md, "Search"): does the full-text index's
waiting work — deletes the rows of versions no longer current (``search_stale``) and writes
those of new current versions (``search_sources``) — a batch per transaction
(:meth:`telha.storage.search.aggregate.Search.index_queued`), so ingests do not wait for the
index and other writers get the store between batches. A search or locate does its own
scope's work first, so this actor keeps the work short for everyone else.

It works at background priority: while versions keep arriving (a burst of ingests) it waits
for them to stop for ``settle_s``, so the burst does not share the writer and the CPU with
the index, but never defers waiting work longer than ``max_defer_s`` (a steady stream is
indexed as it goes). Idle, it looks at the queue (a read) every ``idle_s``; several
replicas on one PostgreSQL database each run one and skip the entries another holds.

A long backlog — the index built again after an upgrade changed how words are indexed, or
after running with search disabled — is logged: ``search_index_rebuild`` when at least
:data:`REBUILD_VERSIONS` versions wait, ``search_index_progress`` every
:data:`PROGRESS_S` seconds while it shrinks, ``search_index_built`` when none waits.
"""

from __future__ import annotations

from typing import Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import structlog

from telha.domain.errors import StorageError
from telha.metrics import Metrics
from telha.row_faults import past_bad_rows
from telha.storage.protocol import RowFaultStore, SearchStore

__all__ = ["SearchIndexStoreOps", "SearchIndexer"]

log = structlog.get_logger("telha.search.indexer")

#: Seconds between looks at an empty queue.
IDLE_S = 0.25
#: Seconds without a new version queued before the index is written (a burst settles).
SETTLE_S = 0.5
#: Most seconds waiting work is deferred while versions keep arriving.
MAX_DEFER_S = 5.0
#: Seconds before trying again after the store failed.
RETRY_S = 2.0
#: Versions waiting at once from which the work is logged as a rebuild, with its progress.
REBUILD_VERSIONS = 100
#: Seconds between progress lines of a rebuild.
PROGRESS_S = 10.0


class SearchIndexStoreOps(RowFaultStore, Protocol):
    """The storage operations the indexer uses (see :class:`telha.storage.protocol.Storage`):
    the search aggregate and the bad-row record."""

    @property
    def search(self) -> SearchStore:
        """The index's queue and writer (``store.search``)."""


class SearchIndexer:
    """Does the index's waiting work while ``[search] enabled``.

    :param store: the storage engine.
    :param idle_s: seconds between looks at an empty queue.
    :param settle_s: seconds without a new version queued before writing (0: at once).
    :param max_defer_s: most seconds waiting work waits for arrivals to settle.
    :param metrics: counts entries that could not be indexed (``telha_rows_failed``).
    """

    def __init__(
        self,
        store: SearchIndexStoreOps,
        *,
        idle_s: float = IDLE_S,
        settle_s: float = SETTLE_S,
        max_defer_s: float = MAX_DEFER_S,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._metrics = metrics or Metrics()
        self._idle_s = idle_s
        self._settle_s = settle_s
        self._max_defer_s = max_defer_s
        self.queued = 0
        self._progress = _Progress()

    def queued_versions(self) -> float:
        """Versions whose index rows waited to be written or deleted at the last look (the
        ``/metrics`` gauge)."""
        return float(self.queued)

    async def run(self, *, task_status: anyio.abc.TaskStatus[SearchIndexer]) -> None:
        """Actor body: report ``self``, then index batches while anything is queued and look
        again every ``idle_s`` when nothing is, until cancelled. A batch the store failed
        is logged and tried again after :data:`RETRY_S` (nothing of it was written); a
        version that cannot be indexed is marked failed with its reason and the others go
        on (docs/architecture.md, "Supervision and bad rows")."""
        task_status.started(self)
        if not self._store.search.enabled:
            return
        while True:
            try:
                await self._drain()
            except StorageError as exc:
                log.warning("search_index_failed", error=exc.message)
                await anyio.sleep(RETRY_S)
            await anyio.sleep(self._idle_s)

    async def _drain(self) -> None:
        """Index batches until nothing waits, pausing ``settle_s`` whenever more versions
        waited than at the previous look (arrivals), until ``max_defer_s`` after work was
        first seen; then batches run back to back until the queue is empty."""
        first_seen: float | None = None
        last = 0  # versions waiting at the previous look
        while True:
            self.queued = await self._store.search.queued_versions()
            self._progress.saw(self.queued, anyio.current_time())
            if not self.queued:
                return
            now = anyio.current_time()
            first_seen = now if first_seen is None else first_seen
            arriving, last = self.queued > last, self.queued
            if arriving and self._settle_s and now - first_seen < self._max_defer_s:
                await anyio.sleep(self._settle_s)
                continue
            if not await past_bad_rows(
                self._store.search.index_queued,
                self._store,
                self._metrics,
                "search_indexer",
                default=1,
            ):
                return
            await anyio.lowlevel.checkpoint()  # other writers get the store in between


class _Progress:
    """The log lines of a long backlog (see the module docstring)."""

    def __init__(self) -> None:
        self._started: float | None = None
        self._first = 0
        self._last_line = 0.0

    def saw(self, queued: int, now: float) -> None:
        """Note ``queued`` versions waiting at ``now`` (seconds)."""
        if self._started is None:
            if queued >= REBUILD_VERSIONS:
                self._started, self._first, self._last_line = now, queued, now
                log.info("search_index_rebuild", queued_versions=queued)
            return
        if not queued:
            log.info("search_index_built", versions=self._first, secs=round(now - self._started, 1))
            self._started = None
        elif now - self._last_line >= PROGRESS_S:
            self._last_line = now
            log.info("search_index_progress", queued_versions=queued, of=max(self._first, queued))
