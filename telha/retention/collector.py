"""The retention actor (docs/operations.md, "Retention"): every ``jobs.gc_interval_s`` it
removes the jobs that ended more than ``jobs.retain_days`` ago and the raw uploads nothing
names any more (:mod:`telha.storage.retention.passes`), logs what it removed and counts it in
``/metrics``. ``jobs.retain_days = 0`` keeps every job: the actor does nothing.

Each pass starts where the last one's scan of ended jobs stopped: the jobs it kept there
(those a version names) stay kept, so a pass reads only what ended since. Several replicas
on one PostgreSQL database each run one; they skip the rows another holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.abc
import structlog

from telha.config import JobsConfig
from telha.domain.errors import StorageError
from telha.domain.ids import now_us
from telha.metrics import Metrics
from telha.row_faults import settle
from telha.storage.api import JobKey, RetentionResult
from telha.storage.protocol import RetentionStore, RowFaultStore

__all__ = ["Retention", "RetentionStoreOps", "cutoff_us", "run_pass"]

log = structlog.get_logger("telha.retention.collector")

#: µs in a day.
DAY_US = 86_400_000_000
#: Seconds after start before the first pass (the service is up and serving by then).
_FIRST_PASS_S = 10.0


class RetentionStoreOps(RowFaultStore, Protocol):
    """The storage retention uses (see :class:`telha.storage.protocol.Storage`): its
    aggregate and the bad-row record."""

    @property
    def retention(self) -> RetentionStore:
        """Ended jobs and unnamed raw uploads removed (``store.retention``)."""


def cutoff_us(retain_days: float, now: int) -> int:
    """The end time (µs) before which a job is removed: ``now`` less ``retain_days``."""
    return now - int(retain_days * DAY_US)


async def run_pass(
    store: RetentionStoreOps,
    config: JobsConfig,
    *,
    now: int,
    after: JobKey | None = None,
    dry_run: bool = False,
) -> RetentionResult:
    """One retention pass at time ``now`` (µs) with ``config.retain_days`` (which must be
    > 0), from ``after`` (the key a previous pass returned).

    :raises StorageError: the store failed; what earlier transactions removed stays removed.
    """
    return await store.retention.remove_ended(
        before_us=cutoff_us(config.retain_days, now), after=after, dry_run=dry_run
    )


class Retention:
    """Runs :func:`run_pass` every ``jobs.gc_interval_s`` (one per replica).

    :param store: the storage engine.
    :param config: the ``[jobs]`` section (``retain_days``, ``gc_interval_s``).
    :param metrics: counts what was removed (``telha_retention_*``).
    :param clock: µs since the epoch (tests inject one).
    """

    def __init__(
        self,
        store: RetentionStoreOps,
        config: JobsConfig,
        metrics: Metrics,
        *,
        clock: Callable[[], int] = now_us,
        first_pass_s: float = _FIRST_PASS_S,
    ) -> None:
        self._store = store
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self._first = min(first_pass_s, config.gc_interval_s)
        self._after: JobKey | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[Retention]) -> None:
        """Actor body: report ``self``, then a pass every ``jobs.gc_interval_s`` until
        cancelled. A pass the store failed is logged and tried again at the next interval
        (what it removed stays removed)."""
        task_status.started(self)
        if self._config.retain_days == 0:
            log.info("retention_disabled", reason="jobs.retain_days = 0")
            return
        await anyio.sleep(self._first)
        while True:
            try:
                await self.run_once()
            except StorageError as exc:
                log.warning("retention_failed", error=exc.message)
            await anyio.sleep(self._config.gc_interval_s)

    async def run_once(self) -> RetentionResult:
        """One pass from where the last one stopped; logs and counts what it removed, and
        the jobs it could not examine (``row_failed``, ``telha_rows_failed``; they stay as
        they are: docs/architecture.md, "Supervision and bad rows")."""
        started = anyio.current_time()
        done = await run_pass(self._store, self._config, now=self._clock(), after=self._after)
        self._after = done.after or self._after
        m = self._metrics
        m.retention_removed.labels("jobs").inc(done.jobs)
        m.retention_removed.labels("events").inc(done.events)
        m.retention_removed.labels("raw_blobs").inc(done.raw_blobs)
        m.retention_bytes_freed.inc(done.bytes_freed)
        for fault in done.faults:  # left as they are; the scan went past them
            await settle(self._store, fault, m, "retention")
        if done.jobs or done.raw_blobs:
            log.info(
                "retention_pass", jobs=done.jobs, events=done.events, raw_blobs=done.raw_blobs,
                bytes_freed=done.bytes_freed, seconds=round(anyio.current_time() - started, 3),
            )  # fmt: skip
        return done
