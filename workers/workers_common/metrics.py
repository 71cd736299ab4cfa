"""Prometheus metrics of a worker process (``python -m workers_common.run --http-port``).

One registry per process, served by :mod:`workers_common.http`. The consumer reports each
job's start and end (:meth:`WorkerMetrics.job_started`, :meth:`WorkerMetrics.job_finished`);
the runner reports (re)connections. Labels are bounded: ``kind`` is the job kind core sent
(``ingest:<format>`` of this worker's formats), ``outcome`` one of :data:`OUTCOMES`.
"""

from __future__ import annotations

import time

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["OUTCOMES", "WorkerMetrics"]

# Counters as `_total` alone: no `_created` series beside every counter and histogram.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

#: ``submitted`` (core answered the submission), ``failed`` (the handler raised; the failure
#: was reported), ``abandoned`` (the lease was lost; nothing submitted), ``not_accepted``
#: (core refused or could not be reached; the lease will expire), ``cancelled`` (core sent a
#: ``cancel`` for it; nothing submitted).
OUTCOMES = ("submitted", "failed", "abandoned", "not_accepted", "cancelled")

_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


class WorkerMetrics:
    """A worker process's metrics (names under ``telha_worker_``)."""

    def __init__(self, worker: str) -> None:
        self.worker = worker
        self.registry = CollectorRegistry()
        r = self.registry
        self.jobs = Counter(
            "telha_worker_jobs", "Jobs this worker finished, by kind and outcome",
            ["kind", "outcome"], registry=r,
        )  # fmt: skip
        self.job_seconds = Histogram(
            "telha_worker_job_seconds",
            "Seconds from receiving a job to its end (handler, fetch and submissions), by kind",
            ["kind"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("telha_worker_jobs_in_flight", "Jobs held now", registry=r)
        self.connects = Counter(
            "telha_worker_connects", "PollJobs streams opened to core (1 + reconnections)",
            registry=r,
        )  # fmt: skip
        self.polling = Gauge(
            "telha_worker_polling", "1 while a PollJobs stream is open, else 0", registry=r
        )
        self._started: dict[str, float] = {}
        self._polling = False

    @property
    def held(self) -> int:
        """Jobs in flight now."""
        return len(self._started)

    @property
    def is_polling(self) -> bool:
        """Whether a PollJobs stream is open now."""
        return self._polling

    def set_polling(self, polling: bool) -> None:
        """The runner opened (``True``) or lost (``False``) its PollJobs stream."""
        if polling and not self._polling:
            self.connects.inc()
        self._polling = polling
        self.polling.set(1 if polling else 0)

    def job_started(self, job_id: str) -> None:
        """A leased job arrived."""
        self._started[job_id] = time.monotonic()
        self.in_flight.inc()

    def job_finished(self, job_id: str, kind: str, outcome: str) -> None:
        """The job ended with ``outcome`` (one of :data:`OUTCOMES`)."""
        started = self._started.pop(job_id, None)
        self.in_flight.dec()
        self.jobs.labels(kind, outcome).inc()
        if started is not None:
            self.job_seconds.labels(kind).observe(time.monotonic() - started)
