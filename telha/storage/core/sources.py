"""The ``sources`` table: one row per source of a scope, what ``GET /v1/sources`` lists
(docs/rest-api.md, "Listings"), written once for both engines.

A row is kept in the same transaction as each write that changes how its source stands:
:func:`note_job` when a job of the source is enqueued
(:func:`telha.storage.jobs.lifecycle.enqueue`), :func:`note_versions` when one of its
versions is published, its current version retired or a version erased. ``changed_at`` (µs)
is the time of the last of these writes, so the listing "newest change first" is one index
range (``sources_by_change``). A job's later state is not copied here: listings join the
last job's row, so every job transition stays one row write.

PostgreSQL's fast paths (``telha_enqueue``, ``telha_note_versions`` in its ``functions.sql``)
run these very statements: :mod:`telha.storage.postgres.functions` fills them in there.
"""

from __future__ import annotations

from telha.domain.model import NewJob
from telha.storage.core.tx import Tx

__all__ = ["NOTE_JOB", "NOTE_JOB_UNNAMED", "NOTE_VERSIONS", "note_job", "note_versions"]

#: A source's row from its latest published version; parameters ``(at, scope, source)``.
NOTE_VERSIONS = (
    "INSERT INTO sources (scope_id, source_id, name, format, state, latest_tx, version_count,"
    " changed_at)"
    " SELECT v.scope_id, v.source_id, v.name, v.format,"
    " CASE WHEN v.erased_at IS NOT NULL THEN 'erased'"
    " WHEN v.retired_tx IS NOT NULL THEN 'retired' ELSE 'current' END, v.tx,"
    " (SELECT count(*) FROM source_versions c WHERE c.scope_id = v.scope_id"
    " AND c.source_id = v.source_id AND c.published_tx IS NOT NULL), ?"
    " FROM source_versions v"
    " WHERE v.scope_id = ? AND v.source_id = ? AND v.published_tx IS NOT NULL"
    " ORDER BY v.tx DESC LIMIT 1"
    " ON CONFLICT (scope_id, source_id) DO UPDATE SET name = excluded.name,"
    " format = excluded.format, state = excluded.state, latest_tx = excluded.latest_tx,"
    " version_count = excluded.version_count, changed_at = excluded.changed_at"
)

#: A named job just enqueued; parameters ``(scope, source, name, format, job, now)``.
NOTE_JOB = (
    "INSERT INTO sources (scope_id, source_id, name, format, state, version_count,"
    " last_job_id, changed_at) VALUES (?, ?, ?, ?, 'pending', 0, ?, ?)"
    " ON CONFLICT (scope_id, source_id) DO UPDATE SET"
    " format = CASE WHEN sources.version_count = 0 THEN excluded.format"
    " ELSE sources.format END,"
    " last_job_id = excluded.last_job_id, changed_at = excluded.changed_at"
)

#: An unnamed job (an erase job) just enqueued; parameters ``(job, now, scope, source)``.
NOTE_JOB_UNNAMED = (
    "UPDATE sources SET last_job_id = ?, changed_at = ? WHERE scope_id = ? AND source_id = ?"
)


async def note_job(tx: Tx, sid: int, job: NewJob, now_us: int) -> None:
    """``job`` was just enqueued at ``now_us`` (µs): it is its source's last job, and a
    source without a published version takes its format. A job without a name (an erase
    job) only updates its source's existing row."""
    if job.name is None:
        await tx.execute(NOTE_JOB_UNNAMED, job.job_id, now_us, sid, job.source_id)
        return
    await tx.execute(NOTE_JOB, sid, job.source_id, job.name, job.format, job.job_id, now_us)


async def note_versions(tx: Tx, sid: int, source_id: bytes, at: int) -> None:
    """The source's versions changed at ``at`` (µs: a publish, a retire, an erasure): its row
    is read again from its latest published version (name, format, state, tx) and its count
    of published versions. A source with no published version is left as it is."""
    await tx.execute(NOTE_VERSIONS, at, sid, source_id)
