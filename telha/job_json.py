"""A job as ``GET /v1/ingest/{jobId}`` answers it (docs/rest-api.md): one rendering shared by
that route and the webhook deliverer, whose POST body is exactly this JSON (so it sits
outside both :mod:`telha.rest` and the deliverer)."""

from __future__ import annotations

import msgspec

from telha.domain.ids import id_str
from telha.domain.listings import JobFamily
from telha.domain.model import JobRecord
from telha.wire import JobEventOut, JobStatus

__all__ = ["attempts_made", "job_status", "pending_hint"]


def attempts_made(attempts: int, job_state: str) -> int:
    """``attempts`` as the API shows it (docs/rest-api.md): the failed attempts a job row
    counts, plus the one in progress or the one that completed (a job released at shutdown,
    or cancelled, is not charged)."""
    return attempts + (job_state in ("leased", "completed"))


def pending_hint(job: JobRecord, polled: set[str]) -> str | None:
    """The ``hint`` of a job: for a ``pending`` ingest job whose format no worker polls
    (``polled``: :meth:`telha.queue.job_queue.JobQueue.polled_formats`), say so; else
    ``None``."""
    if job.state != "pending" or not job.kind.startswith("ingest:") or job.format in polled:
        return None
    return f"no worker polls format {job.format}"


def job_status(job: JobRecord, family: JobFamily, hint: str | None = None) -> JobStatus:
    """The wire form of ``job`` (read with its events) and its ``family`` (its parent and
    its children counted by state); ``hint`` as :func:`pending_hint` gives it."""
    return JobStatus(
        job_id=id_str(job.job_id),
        kind=job.kind,
        state=job.state,
        attempts=attempts_made(job.attempts, job.state),
        source_id=id_str(job.source_id),
        parent_job_id=id_str(family.parent_job_id) if family.parent_job_id else None,
        children=family.children,
        events=[JobEventOut(at=e.at, transition=e.transition, detail=e.detail) for e in job.events],
        failure_reason=job.failure_reason,
        stats=msgspec.json.decode(job.stats) if job.stats else None,
        hint=hint,
    )
