"""``functions.sql`` as the migrator applies it: the statements its functions share with the
general path filled in from :mod:`telha.storage.core`, so each rule is written once
(docs/architecture.md, "Where the SQL lives").

A ``{{name}}`` in ``functions.sql`` stands for :func:`fills`'s statement of that name: a
statement of the core, its ``?`` placeholders replaced in order by the PL/pgSQL expressions
(the function's parameters and variables) named here. What stays written in ``functions.sql``
is the control flow (which statement runs when, what it answers), and the comparisons a
statement's caller makes in Python (the latest version's match of
:func:`telha.domain.dedup.same_identity`): ``tests/integration/test_pg_fast_paths.py`` runs a
case per rule through both paths and compares every row.
"""

from __future__ import annotations

from telha.storage.core import sources
from telha.storage.core.blocklist import BLOCKED
from telha.storage.core.migrations import fill, functions_sql
from telha.storage.core.row_tables import ROW_TABLES
from telha.storage.jobs import fair_lease
from telha.storage.jobs import statements as job_statements
from telha.storage.jobs.lease_fence import FENCE
from telha.storage.postgres.dialect import POSTGRES
from telha.storage.postgres.rows import TAILS
from telha.storage.postgres.tx import CLOCK
from telha.storage.quotas.limits import ADD_USAGE

__all__ = ["fills", "functions"]


def _row_inserts() -> str:
    """Every table of a version's rows from ``p_<field>`` (an array of ``telha_<…>_row``,
    whose fields are the table's columns), the version's tx column set to ``v_tx``."""
    out = []
    for t in ROW_TABLES:
        cols = ", ".join("v_tx" if name == t.tx_column else f'u."{name}"' for name, _ in t.columns)
        out.append(
            f"INSERT INTO {t.table} ({t.names}) SELECT {cols}"
            f" FROM unnest(p_{t.field}) AS u{TAILS.get(t.table, '')};"
        )
    return "\n    ".join(out)


def fills() -> dict[str, str]:
    """What each ``{{name}}`` of ``functions.sql`` stands for."""
    j, h = job_statements, fair_lease
    active_same = j.active_same_content(POSTGRES)
    return {
        "note_versions": fill(sources.NOTE_VERSIONS, "p_at", "p_scope", "p_source"),
        "note_job": fill(
            sources.NOTE_JOB, "p_scope", "p_source", "p_name", "p_format", "p_job_id", "p_now"
        ),
        "note_job_unnamed": fill(
            sources.NOTE_JOB_UNNAMED, "p_job_id", "p_now", "p_scope", "p_source"
        ),
        "head_find": fill(h.HEAD_FIND, "p_scope", "p_format"),
        "head_add": fill(h.HEAD_ADD, "p_scope", "p_format"),
        "blocked": fill(
            BLOCKED.format(digests="digest = ANY(?::bytea[])"), "p_scope", "ARRAY[p_hash]"
        ),
        "latest_version": fill(j.LATEST_VERSION, "p_scope", "p_source"),
        "active_same_content": fill(active_same, "p_scope", "p_source", "p_hash", "p_fingerprint"),
        "active_fetch": fill(j.ACTIVE_FETCH, "p_scope", "p_source", "p_format"),
        "insert_job": fill(
            j.INSERT_JOB,
            "p_job_id",
            "p_scope",
            "p_kind",
            "p_format",
            "p_source",
            "p_hash",
            "p_payload",
            "p_now",
            "p_now",
            "p_now",
            "p_name",
            "NULL",
            "p_fingerprint",
        ),
        "enqueued_event": fill(
            j.ADD_EVENT, "p_job_id", "p_job_id", "p_now", "'enqueued'", "p_detail"
        ),
        "lease_heads": fill(
            h.heads_sql("h.format = ANY(?)", " AND (? IS NULL OR h.scope_id = ?)", "?"),
            "p_formats",
            "p_scope",
            "p_scope",
            "p_now",
            "p_candidates",
        ),
        "oldest_job": fill(h.OLDEST_JOB, "v_head.scope_id", "v_head.format", "p_now"),
        "head_touch": fill(h.HEAD_TOUCH, "p_now", "v_head.scope_id", "v_head.format"),
        "lease_job": fill(j.LEASE_JOB, "p_owner", "p_deadline", "p_now", "v_got"),
        "leased_event": fill(
            j.ADD_EVENT, "v_got", "v_got", "p_now", "'leased'", "'worker=' || p_owner"
        ),
        "lease_fence": fill(FENCE, "p_job"),
        "commit_blocked": fill(
            BLOCKED.format(digests="digest = ANY(?::bytea[])"),
            "p_scope",
            "ARRAY[p_version.content_hash, p_version.canonical_text_hash]",
        ),
        "clock": CLOCK,
        "row_inserts": _row_inserts(),
        "add_usage": fill(ADD_USAGE, "v_scope", "pg_backend_pid()", "v_delta"),
        "complete_job": fill(j.COMPLETE_JOB, "p_stats", "p_now", "p_job"),
        "completed_event": fill(
            j.ADD_EVENT, "p_job", "p_job", "p_now", "'completed'", "'version=' || v_tx || p_detail"
        ),
    }


def functions() -> str:
    """The text of ``functions.sql`` with every ``{{name}}`` filled in (:func:`fills`).

    :raises ValueError: a ``{{name}}`` has no fill, or a fill is used nowhere.
    """
    return functions_sql("telha.storage.postgres", fills())
