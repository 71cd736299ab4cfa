"""A job as ``GET /v1/ingest/{jobId}`` answers it (docs/rest-api.md): one rendering shared by
that route and the webhook deliverer, whose POST body is exactly this JSON."""

from __future__ import annotations

import msgspec

from telha.domain.ids import id_str
from telha.domain.model import JobRecord
from telha.wire import JobEventOut, JobStatus

__all__ = ["job_status"]


def job_status(job: JobRecord) -> JobStatus:
    """The wire form of ``job`` (read with its events).

    ``attempts`` counts attempts made: the failed ones, plus the one in progress or the one
    that completed (a job released at shutdown is not charged).
    """
    return JobStatus(
        job_id=id_str(job.job_id),
        kind=job.kind,
        state=job.state,
        attempts=job.attempts + (job.state in ("leased", "completed")),
        source_id=id_str(job.source_id),
        events=[JobEventOut(at=e.at, transition=e.transition, detail=e.detail) for e in job.events],
        failure_reason=job.failure_reason,
        stats=msgspec.json.decode(job.stats) if job.stats else None,
    )
