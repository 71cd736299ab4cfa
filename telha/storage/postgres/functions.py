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

import re

from telha.storage.core import fair_lease, job_statements, sources
from telha.storage.core.blocklist import BLOCKED
from telha.storage.core.lease_fence import FENCE
from telha.storage.core.migrations import functions_sql
from telha.storage.core.row_tables import ROW_TABLES
from telha.storage.postgres.rows import TAILS
from telha.storage.postgres.tx import CLOCK

__all__ = ["fills", "functions", "plpgsql"]

_FILL = re.compile(r"\{\{(\w+)\}\}")


def plpgsql(statement: str, *exprs: str) -> str:
    """``statement`` (``?`` placeholders, none inside a literal) with its placeholders
    replaced, in order, by ``exprs``.

    :raises ValueError: ``statement`` has not one placeholder per expression.
    """
    parts = statement.split("?")
    if len(parts) != len(exprs) + 1:
        raise ValueError(f"{len(parts) - 1} placeholders for {len(exprs)} expressions")
    out = [parts[0]]
    for expr, part in zip(exprs, parts[1:], strict=True):
        out.append(f"{expr}{part}")
    return "".join(out)


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
    active_same = j.ACTIVE_SAME_CONTENT.format(null_equal="IS NOT DISTINCT FROM")
    return {
        "note_versions": plpgsql(sources.NOTE_VERSIONS, "p_at", "p_scope", "p_source"),
        "note_job": plpgsql(
            sources.NOTE_JOB, "p_scope", "p_source", "p_name", "p_format", "p_job_id", "p_now"
        ),
        "note_job_unnamed": plpgsql(
            sources.NOTE_JOB_UNNAMED, "p_job_id", "p_now", "p_scope", "p_source"
        ),
        "head_find": plpgsql(h.HEAD_FIND, "p_scope", "p_format"),
        "head_add": plpgsql(h.HEAD_ADD, "p_scope", "p_format"),
        "blocked": plpgsql(
            BLOCKED.format(digests="digest = ANY(?::bytea[])"), "p_scope", "ARRAY[p_hash]"
        ),
        "latest_version": plpgsql(j.LATEST_VERSION, "p_scope", "p_source"),
        "active_same_content": plpgsql(
            active_same, "p_scope", "p_source", "p_hash", "p_fingerprint"
        ),
        "active_fetch": plpgsql(j.ACTIVE_FETCH, "p_scope", "p_source", "p_format"),
        "insert_job": plpgsql(
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
        "enqueued_event": plpgsql(
            j.ADD_EVENT, "p_job_id", "p_job_id", "p_now", "'enqueued'", "p_detail"
        ),
        "lease_heads": plpgsql(
            h.heads_sql("h.format = ANY(?)", " AND (? IS NULL OR h.scope_id = ?)", "?"),
            "p_formats",
            "p_scope",
            "p_scope",
            "p_now",
            "p_candidates",
        ),
        "oldest_job": plpgsql(h.OLDEST_JOB, "v_head.scope_id", "v_head.format", "p_now"),
        "head_touch": plpgsql(h.HEAD_TOUCH, "p_now", "v_head.scope_id", "v_head.format"),
        "lease_job": plpgsql(j.LEASE_JOB, "p_owner", "p_deadline", "p_now", "v_got"),
        "leased_event": plpgsql(
            j.ADD_EVENT, "v_got", "v_got", "p_now", "'leased'", "'worker=' || p_owner"
        ),
        "lease_fence": plpgsql(FENCE, "p_job"),
        "commit_blocked": plpgsql(
            BLOCKED.format(digests="digest = ANY(?::bytea[])"),
            "p_scope",
            "ARRAY[p_version.content_hash, p_version.canonical_text_hash]",
        ),
        "clock": CLOCK,
        "row_inserts": _row_inserts(),
        "complete_job": plpgsql(j.COMPLETE_JOB, "p_stats", "p_now", "p_job"),
        "completed_event": plpgsql(
            j.ADD_EVENT, "p_job", "p_job", "p_now", "'completed'", "'version=' || v_tx || p_detail"
        ),
    }


def functions() -> str:
    """The text of ``functions.sql`` with every ``{{name}}`` filled in.

    :raises ValueError: a ``{{name}}`` has no fill, or a fill is used nowhere.
    """
    text = functions_sql("telha.storage.postgres")
    table = fills()
    used = set(_FILL.findall(text))
    if used != table.keys():
        raise ValueError(
            f"functions.sql: unfilled {used - table.keys()}, unused {table.keys() - used}"
        )
    return _FILL.sub(lambda m: table[m.group(1)], text)
