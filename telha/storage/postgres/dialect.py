"""PostgreSQL's :class:`~telha.storage.core.dialect.Dialect`: the text PostgreSQL's SQL and
planner need where SQLite's differ (docs/architecture.md, "The storage seam")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telha.domain.search_query import Term, like_pattern, tsquery
from telha.domain.search_text import folded_words, tsvector_literal

__all__ = ["POSTGRES", "PostgresDialect"]

#: A diff's page by grouping both versions' rows by node id: one scan of
#: ``nodes_by_source_tx``, no join, so no plan can turn quadratic (on statistics not yet
#: refreshed after a large version is written, the planner would probe one version's rows
#: once per row of the other for an anti-join).
_PAGE_GROUPED = (
    "SELECT node_id FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_from IN (?, ?)"
    " AND NOT erased AND node_id > ? GROUP BY node_id HAVING count(*) = 1"
    " OR count(DISTINCT labels) > 1 OR count(DISTINCT properties) > 1"
    " ORDER BY node_id LIMIT ?"
)
_UNCHANGED_GROUPED = (
    "SELECT count(*) FROM (SELECT node_id FROM nodes WHERE scope_id = ? AND source_id = ?"
    " AND tx_from IN (?, ?) AND NOT erased GROUP BY node_id HAVING count(*) = 2"
    " AND count(DISTINCT labels) = 1 AND count(DISTINCT properties) = 1) u"
)


class PostgresDialect:
    """See :class:`telha.storage.core.dialect.Dialect` for each member's meaning."""

    name = "postgres"
    null_equal = "IS NOT DISTINCT FROM"
    byte_length = "octet_length"
    #: One array parameter binds any number of values.
    in_group: int | None = None
    span_text = "s.text"
    index_checks: tuple[tuple[str, str], ...] = ()
    index_documents: str | None = None
    expired_leases_batch = " ORDER BY j.job_id LIMIT 500 FOR UPDATE OF j SKIP LOCKED"
    fts_tables: tuple[str, ...] = ()

    @staticmethod
    def any(column: str, values: Sequence[Any], pg_type: str) -> tuple[str, tuple[Any, ...]]:
        """``column = ANY(?::pg_type[])``: one array parameter, one plan for any count."""
        return f"{column} = ANY(?::{pg_type}[])", (list(values),)

    @staticmethod
    def contains(haystack: str) -> str:
        """``position(? in haystack) > 0``."""
        return f"position(? in {haystack}) > 0"

    @staticmethod
    def blob_append(column: str) -> str:
        """``column || ?`` (``bytea || bytea`` is ``bytea``)."""
        return f"{column} || ?"

    @staticmethod
    def indexed_by(index: str) -> str:
        """Nothing: the planner chooses from statistics."""
        return ""

    @staticmethod
    def json_text_elements(expr: str, alias: str) -> str:
        """``jsonb_array_elements_text`` of ``expr`` cast to ``jsonb``."""
        return f"jsonb_array_elements_text(CAST({expr} AS jsonb)) {alias}"

    @staticmethod
    def json_text_field(expr: str, key: str) -> str:
        """``->>`` over the bytes decoded as UTF-8 and cast to ``jsonb``."""
        return f"convert_from({expr}, 'UTF8')::jsonb ->> '{key}'"

    @staticmethod
    def version_halves(alias: str = "") -> tuple[str, ...]:
        """One part: ``nodes_by_source_tx`` holds every row."""
        return ("",)

    @staticmethod
    def key_index_condition(column: str) -> str:
        """Nothing: ``nodes_by_key`` holds every row."""
        return ""

    @staticmethod
    def indexed_scope(sid: int) -> bool:
        """Always: the index is a column of the rows."""
        return True

    @staticmethod
    def search_match(terms: list[Term], sid: int) -> tuple[list[Any], list[Any]]:
        """The ``tsquery`` and the scope id."""
        return [tsquery(terms), sid], []

    @staticmethod
    def search_sql(conds: list[str], *, ranked: bool) -> str:
        """``body @@ q`` over the scope's rows (``ts_rank`` when ranked)."""
        extra = "".join(f" AND {c}" for c in conds)
        score = "ts_rank(s.body, q)" if ranked else "0"
        order = "score DESC, s.rowid" if ranked else "s.rowid"
        return (
            f"SELECT s.rowid, {score} AS score FROM search_spans s, CAST(?::text AS tsquery) q"
            f" WHERE s.body @@ q AND s.scope_id = ?{extra} ORDER BY {order} LIMIT ? OFFSET ?"
        )

    @staticmethod
    def ranked_window_sql(conds: list[str]) -> str | None:
        """None: every match is ranked."""
        return None

    @staticmethod
    def fragment_sql(fragment: str, sid: int, cols: str, conds: list[str]) -> tuple[str, list[Any]]:
        """The ``pg_trgm`` GIN index over ``words`` asked for ``LIKE '%fragment%'`` (the
        first ``limit`` rows found, in no set order; a fragment under 3 characters reads
        every row of the scope)."""
        extra = "".join(f" AND {c}" for c in conds)
        sql = (
            f"SELECT {cols} FROM search_spans s WHERE s.scope_id = ? AND s.words LIKE ?{extra}"
            " LIMIT ?"
        )
        return sql, [sid, like_pattern(fragment)]

    @staticmethod
    def search_columns(span: str, length: int) -> tuple[Any, ...]:
        """``(body, text, words)``: the words' ``tsvector`` literal, the span's text, its
        distinct folded words."""
        folded = folded_words(span)
        return tsvector_literal(folded), span, " ".join(dict.fromkeys(folded))

    @staticmethod
    def key_table(
        cols: str, types: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> tuple[str, str, list[Any]]:
        """``unnest(?::type[], …) k(cols)``: one array parameter a key column."""
        arrays = ", ".join(f"?::{t}[]" for t in types)
        return "", f"unnest({arrays}) k({cols})", [list(col) for col in zip(*keys, strict=True)]

    @staticmethod
    def diff_page(
        sid: int, source_id: bytes, old: int, new: int, after: bytes, limit: int
    ) -> tuple[str, tuple[Any, ...]]:
        """Both versions' rows grouped by node id (:data:`_PAGE_GROUPED`)."""
        return _PAGE_GROUPED, (sid, source_id, old, new, after, limit)

    @staticmethod
    def diff_unchanged(
        sid: int, source_id: bytes, old: int, new: int
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """One count over both versions' rows grouped by node id."""
        return [(_UNCHANGED_GROUPED, (sid, source_id, old, new))]


POSTGRES = PostgresDialect()
