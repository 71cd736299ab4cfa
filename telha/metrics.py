"""Prometheus metrics (``GET /metrics``, docs/operations.md), one registry per service instance.

Counters are updated where things happen (REST front, queue, ingestor, gRPC servicer); the
job gauges come from a snapshot of the active (pending/leased) job counts taken by every
reaper pass and before every scrape; channel depths are read from each actor's anyio memory
stream ``statistics()`` at scrape time. Every label takes values from a bounded set: formats
and kinds are the known formats, REST routes are route templates, worker stat names are
capped (:data:`MAX_WORKER_STATS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram, Summary
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# Counters as `_total` alone: no `_created` series beside every counter and histogram.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

__all__ = ["MAX_WORKER_STATS", "Metrics"]

#: Distinct ``(kind, stat)`` series of ``telha_worker_stat`` at most; later names are counted
#: in ``telha_worker_stats_dropped_total`` instead.
MAX_WORKER_STATS = 256
_STAT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

#: Seconds: lease-to-submit spans sub-second text jobs to 10-minute docling parses.
_JOB_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

#: ``name -> statistics()`` of a bounded channel (an anyio memory object stream).
ChannelSource = Callable[[], Mapping[str, Any]]


class _Snapshots(Collector):
    """Gauges computed at scrape time: active jobs by kind and state (from the last snapshot)
    and the depth of each registered channel."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], int] = {}
        self.channels: list[ChannelSource] = []
        self.gauges: list[tuple[str, str, Callable[[], float]]] = []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        jobs = GaugeMetricFamily(
            "telha_jobs",
            "Jobs waiting (pending) or being worked on (leased), by kind and state",
            labels=["kind", "state"],
        )
        for (kind, state), n in sorted(self.jobs.items()):
            jobs.add_metric([kind, state], n)
        yield jobs
        used = GaugeMetricFamily(
            "telha_channel_items",
            "Items buffered in a bounded channel (anyio memory stream statistics)",
            labels=["channel"],
        )
        size = GaugeMetricFamily(
            "telha_channel_capacity", "Capacity of a bounded channel", labels=["channel"]
        )
        recv = GaugeMetricFamily(
            "telha_channel_waiting_receivers",
            "Tasks waiting to receive from a bounded channel",
            labels=["channel"],
        )
        send = GaugeMetricFamily(
            "telha_channel_waiting_senders",
            "Tasks waiting to send to a bounded channel (backpressure)",
            labels=["channel"],
        )
        for source in self.channels:
            for name, stats in sorted(source().items()):
                used.add_metric([name], stats.current_buffer_used)
                size.add_metric([name], float(stats.max_buffer_size))
                recv.add_metric([name], stats.tasks_waiting_receive)
                send.add_metric([name], stats.tasks_waiting_send)
        yield from (used, size, recv, send)
        for name, doc, read in self.gauges:
            gauge = GaugeMetricFamily(name, doc)
            gauge.add_metric([], read())
            yield gauge


class Metrics:
    """The service's metrics; pass one instance to the parts that update it.

    Names, types and labels are listed in docs/operations.md ("Metrics").
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._snapshots = _Snapshots()
        r.register(self._snapshots)
        self.ingest_requests = Counter(
            "telha_ingest_requests",
            "POST /v1/ingest answers by format and outcome"
            " (created, enqueued, deduplicated, error)",
            ["format", "outcome"],
            registry=r,
        )
        self.webhook_deliveries = Counter(
            "telha_webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered, failed (retried later), expired"
            " (given up after webhooks.max_age_s), gone (the job no longer exists),"
            " failed_permanently (can never be made: kept failed with its reason)",
            ["outcome"],
            registry=r,
        )
        self.retention_removed = Counter(
            "telha_retention_removed",
            "What job retention removed: what=jobs, events (theirs), raw_blobs (uploads"
            " nothing named any more)",
            ["what"],
            registry=r,
        )
        self.rows_failed = Counter(
            "telha_rows_failed",
            "Stored rows an actor could not process, recorded failed and skipped"
            " (docs/operations.md, Bad rows), by actor and what: job, search_entry,"
            " retention_job",
            ["actor", "what"],
            registry=r,
        )
        self.retention_bytes_freed = Counter(
            "telha_retention_bytes_freed",
            "Bytes job retention removed: raw upload bytes plus the removed jobs' payloads",
            registry=r,
        )
        self.ingest_seconds = Histogram(
            "telha_ingest_seconds",
            "POST /v1/ingest handling time in seconds (json: parse, project and commit)",
            ["format"],
            registry=r,
        )
        self.ingested_bytes = Counter(
            "telha_ingested_bytes",
            "Raw content bytes accepted by POST /v1/ingest (applied or enqueued, not"
            " deduplicated), by format",
            ["format"],
            registry=r,
        )
        self.dedup_hits = Counter(
            "telha_dedup_hits",
            "Deduplicated content: stage=request (POST /v1/ingest answered deduplicated) or"
            " stage=submit (a submission whose canonical text equals the latest version's)",
            ["stage", "kind"],
            registry=r,
        )
        self.job_transitions = Counter(
            "telha_job_transitions",
            "Job state transitions (leased, completed, retried, lease_expired, worker_lost, dead,"
            " released) by job kind",
            ["kind", "transition"],
            registry=r,
        )
        self.leases_granted = Counter(
            "telha_leases_granted", "Leases granted to pollers, by job kind", ["kind"], registry=r
        )
        self.leases_expired = Counter(
            "telha_leases_expired",
            "Leases the reaper found past their deadline, by job kind",
            ["kind"],
            registry=r,
        )
        self.leases_lost = Counter(
            "telha_leases_lost",
            "Submissions, heartbeats or fetches refused because the caller no longer held the"
            " lease (stale generation, reaped, finished), by job kind",
            ["kind"],
            registry=r,
        )
        self.lease_to_submit = Histogram(
            "telha_lease_to_submit_seconds",
            "Seconds from a lease being granted to the job's final submission or reported"
            " failure (jobs leased through this process), by job kind",
            ["kind"],
            buckets=_JOB_BUCKETS,
            registry=r,
        )
        self.submissions = Counter(
            "telha_submissions_applied",
            "Final (or single-shot) submissions applied, by job kind",
            ["kind"],
            registry=r,
        )
        self.partials = Counter(
            "telha_partials_applied",
            "Partial submissions of a stream applied (replays excluded), by job kind",
            ["kind"],
            registry=r,
        )
        self.invalid_submissions = Counter(
            "telha_submissions_invalid",
            "Submissions refused as invalid_submission (nothing written), by job kind",
            ["kind"],
            registry=r,
        )
        self.canonical_bytes = Counter(
            "telha_canonical_bytes",
            "Canonical text bytes (UTF-8) written by applied submissions, by job kind",
            ["kind"],
            registry=r,
        )
        self.worker_stat = Summary(
            "telha_worker_stat",
            "Numeric top-level values of the stats dicts workers submit (sum and count per"
            " job kind and stat name)",
            ["kind", "stat"],
            registry=r,
        )
        self.worker_stats_dropped = Counter(
            "telha_worker_stats_dropped",
            f"Worker stat values not exported: a name not matching {_STAT_NAME.pattern} or"
            f" beyond {MAX_WORKER_STATS} distinct (kind, stat) series",
            registry=r,
        )
        self.http_requests = Counter(
            "telha_http_requests",
            "REST requests by method, route template and status code",
            ["method", "route", "status"],
            registry=r,
        )
        self.http_seconds = Histogram(
            "telha_http_request_duration_seconds",
            "REST request handling time in seconds (until the response is sent), by method"
            " and route template",
            ["method", "route"],
            registry=r,
        )
        self._stat_series: set[tuple[str, str]] = set()

    # --- scrape-time sources ---------------------------------------------------------------

    def set_job_counts(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Replace the active-jobs snapshot: ``{(kind, state): n}`` for ``pending`` and
        ``leased``. A kind seen before and absent now reports 0 (not a stale count)."""
        snap = {key: 0 for key in self._snapshots.jobs}
        snap.update(counts)
        self._snapshots.jobs = snap

    def watch_channels(self, source: ChannelSource) -> None:
        """Export, at every scrape, the ``statistics()`` that ``source()`` returns per
        channel name (anyio ``MemoryObjectStreamStatistics``)."""
        self._snapshots.channels.append(source)

    def watch_gauge(self, name: str, doc: str, read: Callable[[], float]) -> None:
        """Export gauge ``name`` (no labels), its value read at every scrape."""
        self._snapshots.gauges.append((name, doc, read))

    # --- events ----------------------------------------------------------------------------

    def transition(self, kind: str, name: str) -> None:
        """Count one job state transition (``telha_job_transitions_total``); a ``leased``
        transition also counts a granted lease, ``lease_expired`` an expired one."""
        self.job_transitions.labels(kind, name).inc()
        if name == "leased":
            self.leases_granted.labels(kind).inc()

    def lease_expired(self, kind: str, new_state: str) -> None:
        """The reaper returned an expired lease to ``new_state`` (``pending`` or ``dead``)."""
        self.leases_expired.labels(kind).inc()
        self.transition(kind, "lease_expired" if new_state == "pending" else "dead")

    def ingest_accepted(self, fmt: str, outcome: str, size: int) -> None:
        """One successful ``POST /v1/ingest``: ``outcome`` as in ``telha_ingest_requests``;
        ``size`` raw bytes (counted unless deduplicated)."""
        self.ingest_requests.labels(fmt, outcome).inc()
        if outcome == "deduplicated":
            self.dedup_hits.labels("request", "json" if fmt == "json" else f"ingest:{fmt}").inc()
        else:
            self.ingested_bytes.labels(fmt).inc(size)

    def submission_applied(
        self,
        kind: str,
        *,
        partial: bool,
        replay: bool,
        deduplicated: bool,
        canonical_bytes: int,
        stats: Mapping[str, Any] | None,
    ) -> None:
        """One accepted submission: a stream part (``partial``) or a final/single-shot one.
        A replay (answered from the checkpoint) counts nothing."""
        if replay:
            return
        (self.partials if partial else self.submissions).labels(kind).inc()
        if deduplicated:
            self.dedup_hits.labels("submit", kind).inc()
        else:
            self.canonical_bytes.labels(kind).inc(canonical_bytes)
        if stats:
            self.worker_stats(kind, stats)

    def worker_stats(self, kind: str, stats: Mapping[str, Any]) -> None:
        """Observe each numeric (int/float, not bool) top-level value of a worker's stats
        dict in ``telha_worker_stat{kind, stat}``; other values are ignored, names beyond the
        cap or not metric-safe are counted as dropped."""
        for name, value in stats.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            key = (kind, name)
            if key not in self._stat_series:
                if len(self._stat_series) >= MAX_WORKER_STATS or not _STAT_NAME.match(name):
                    self.worker_stats_dropped.inc()
                    continue
                self._stat_series.add(key)
            self.worker_stat.labels(kind, name).observe(value)
