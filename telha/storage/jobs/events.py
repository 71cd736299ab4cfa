"""Reading a job's events after a sequence number, for the live event stream
(``GET /v1/ingest/{jobId}/events``, docs/rest-api.md "Live events"), written once for both
engines.

The job's state is read *before* its events. A job reaches a terminal state in the same
transaction that appends its terminal event, so when the state read is terminal, the events
read after it include that event: a reader that stops once it saw a terminal state and no
more events has sent every event. (On PostgreSQL each statement of a read sees its own
snapshot; SQLite reads both in one.)
"""

from __future__ import annotations

from telha.domain.model import JobEvent, JobEventPage, JobState, Scope
from telha.storage.core.tx import Tx

__all__ = ["events_after"]


async def events_after(
    tx: Tx, scope: Scope, job_id: bytes, after_seq: int, limit: int
) -> JobEventPage | None:
    """The job's state and at most ``limit`` of its events with ``seq > after_seq``, in
    ``seq`` order (the ``job_events`` primary key); ``None`` when the job is absent or in
    another scope."""
    row = await tx.fetchone(
        "SELECT j.state, s.tenant_id, s.organization_id FROM jobs j"
        " JOIN scopes s ON s.scope_id = j.scope_id WHERE j.job_id = ?",
        job_id,
    )
    if row is None or Scope(row[1], row[2]) != scope:
        return None
    state: JobState = row[0]
    found = await tx.fetchall(
        "SELECT seq, at, transition, detail FROM job_events WHERE job_id = ? AND seq > ?"
        " ORDER BY seq LIMIT ?",
        job_id, after_seq, limit,
    )  # fmt: skip
    return JobEventPage(state, tuple((int(r[0]), JobEvent(r[1], r[2], r[3])) for r in found))
