"""Structured logging (structlog): JSON lines on stderr, or a console renderer on a TTY.

The configuration, the redaction backstop and the job-context binding are shared with the
workers (:mod:`workers_common.logs`, which imports nothing from ``telha``); this module adds
the job fields of core's own records.
"""

from __future__ import annotations

from typing import Any

from telha.domain.ids import id_str
from telha.domain.model import JobRecord, NewJob, Scope
from workers_common.logs import bound_job, configure_logging, job_fields, redact

__all__ = ["bound_job", "configure_logging", "fields_of", "redact"]


def _id(raw: bytes) -> str:
    """An id for a log line: its UUID, or its hex when a stored id is not 16 bytes (a row
    the actors pass by must not fail the log line naming it: docs/architecture.md,
    "Supervision and bad rows")."""
    return id_str(raw) if len(raw) == 16 else bytes(raw).hex()


def fields_of(job: JobRecord | NewJob, scope: Scope | None = None) -> dict[str, Any]:
    """The log fields of ``job`` (:func:`workers_common.logs.job_fields`): ``attempt`` is the
    attempt in progress or next (failed attempts + 1; 1 for a new job). ``scope`` is needed
    for a :class:`NewJob`, which does not carry one.

    :raises ValueError: a :class:`NewJob` without ``scope``.
    """
    if isinstance(job, JobRecord):
        scope, attempt = job.scope, job.attempts + 1
    elif scope is None:
        raise ValueError("a NewJob's log fields need its scope")
    else:
        attempt = 1
    return job_fields(
        job_id=_id(job.job_id),
        kind=job.kind,
        source_id=_id(job.source_id),
        attempt=attempt,
        tenant_id=scope.tenant_id,
        organization_id=scope.organization_id,
    )
