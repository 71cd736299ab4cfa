"""The statements of a job's life that PostgreSQL's fast paths run too
(``telha_enqueue``, ``telha_lease_fair``, ``telha_commit_single`` in its ``functions.sql``):
:mod:`telha.storage.jobs.lifecycle` runs them on both engines, and
:mod:`telha.storage.postgres.functions` fills them in there, so each is written once.
Placeholders are ``?``, in the order each constant's comment names.
"""

from __future__ import annotations

from telha.storage.core.dialect import Dialect

__all__ = [
    "ACTIVE_FETCH",
    "ADD_EVENT",
    "COMPLETE_JOB",
    "INSERT_JOB",
    "LATEST_VERSION",
    "LEASE_JOB",
    "active_same_content",
]

#: A pending job; parameters ``(job, scope, kind, format, source, hash, payload, now, now, now,
#: name, parent, fingerprint)``.
INSERT_JOB = (
    "INSERT INTO jobs (job_id, scope_id, kind, format, source_id, content_hash,"
    " payload, state, available_at, created_at, updated_at, name, parent_job_id,"
    " fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)"
)
#: A job's next event; parameters ``(job, job, at, transition, detail)``.
ADD_EVENT = (
    "INSERT INTO job_events (job_id, seq, at, transition, detail) VALUES (?,"
    " (SELECT coalesce(max(seq), 0) + 1 FROM job_events WHERE job_id = ?), ?, ?, ?)"
)
#: What dedup compares with; parameters ``(scope, source)``.
LATEST_VERSION = (
    "SELECT content_hash, canonical_text_hash, job_id, fingerprint, identity, retired_tx,"
    " erased_at, tx FROM source_versions"
    " WHERE scope_id = ? AND source_id = ? AND published_tx IS NOT NULL"
    " ORDER BY tx DESC LIMIT 1"
)
_ACTIVE_SAME_CONTENT = (
    "SELECT job_id FROM jobs WHERE scope_id = ? AND source_id = ? AND content_hash = ?"
    " AND fingerprint {null_equal} ? AND state IN ('pending', 'leased')"
    " ORDER BY created_at, job_id LIMIT 1"
)


def active_same_content(dialect: Dialect) -> str:
    """The oldest active job of the same content, the fingerprint compared so that ``NULL``
    (not known) equals ``NULL``; parameters ``(scope, source, hash, fingerprint)``."""
    return _ACTIVE_SAME_CONTENT.format(null_equal=dialect.null_equal)


#: The oldest active job fetching the same format; parameters ``(scope, source, format)``.
ACTIVE_FETCH = (
    "SELECT job_id FROM jobs WHERE scope_id = ? AND source_id = ? AND format = ?"
    " AND content_hash IS NULL AND state IN ('pending', 'leased')"
    " ORDER BY created_at, job_id LIMIT 1"
)
#: A job leased; parameters ``(owner, deadline, now, job)``.
LEASE_JOB = (
    "UPDATE jobs SET state = 'leased', lease_generation = lease_generation + 1,"
    " lease_owner = ?, lease_deadline = ?, updated_at = ? WHERE job_id = ?"
)
#: A held job completed; parameters ``(stats, now, job)``.
COMPLETE_JOB = (
    "UPDATE jobs SET state = 'completed', lease_owner = NULL, lease_deadline = NULL,"
    " stats = ?, continuation = NULL, updated_at = ? WHERE job_id = ?"
)
