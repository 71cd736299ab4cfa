"""Prometheus metrics (``GET /metrics``, DESIGN.md §5), one registry per service instance.

Counters are updated where things happen (REST front, queue, ingestor); the job gauges are
refreshed by the queue's reaper from the pending/leased partial indexes.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]


class Metrics:
    """The service's metrics; pass one instance to the parts that update it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.ingest_requests = Counter(
            "telha_ingest_requests",
            "POST /v1/ingest answers by format and outcome"
            " (created, enqueued, deduplicated, error)",
            ["format", "outcome"],
            registry=self.registry,
        )
        self.ingest_seconds = Histogram(
            "telha_ingest_seconds",
            "POST /v1/ingest handling time in seconds (json: parse, project and commit)",
            ["format"],
            registry=self.registry,
        )
        self.job_transitions = Counter(
            "telha_job_transitions",
            "Job state transitions (leased, completed, retried, lease_expired, dead, released)",
            ["transition"],
            registry=self.registry,
        )
        self.jobs = Gauge(
            "telha_jobs",
            "Jobs waiting or being worked on, by state (refreshed every reaper pass)",
            ["state"],
            registry=self.registry,
        )
