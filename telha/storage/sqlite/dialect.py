"""SQLite's :class:`~telha.storage.core.dialect.Dialect`: the text SQLite's SQL and planner
need where PostgreSQL's differ (docs/architecture.md, "The storage seam")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telha.domain.identity import DEFERRED, INHERITED
from telha.domain.search_query import (
    MAX_INDEXED_SCOPE,
    SCOPE_ROWID_BITS,
    Term,
    fts5_query,
    fts5_trigrams,
    scope_rowids,
)
from telha.domain.search_text import fts5_body, is_verbatim

__all__ = ["SQLITE", "SqliteDialect"]

#: A diff's ``to`` rows (one half of them: ``{half}``) with no equal ``from`` row: added or
#: changed. Parameters: scope, source, to, after, from.
_ADDED_OR_CHANGED = (
    "SELECT t.node_id FROM nodes t WHERE t.scope_id = ? AND t.source_id = ? AND t.tx_from = ?"
    "{half} AND NOT t.erased AND t.node_id > ? AND NOT EXISTS (SELECT 1 FROM nodes f"
    " WHERE f.scope_id = t.scope_id AND f.node_id = t.node_id AND f.tx_from = ?"
    " AND f.source_id = t.source_id AND NOT f.erased AND f.labels = t.labels"
    " AND f.properties = t.properties)"
)
#: A diff's ``from`` rows (one half) with no ``to`` row: removed. Parameters: scope,
#: source, from, after, to.
_REMOVED = (
    "SELECT f.node_id FROM nodes f WHERE f.scope_id = ? AND f.source_id = ? AND f.tx_from = ?"
    "{half} AND NOT f.erased AND f.node_id > ? AND NOT EXISTS (SELECT 1 FROM nodes t"
    " WHERE t.scope_id = f.scope_id AND t.node_id = f.node_id AND t.tx_from = ?"
    " AND t.source_id = f.source_id AND NOT t.erased)"
)
#: A diff's unchanged rows of one half of ``to``. Parameters: from, scope, source, to.
_UNCHANGED = (
    "SELECT count(*) FROM nodes t JOIN nodes f ON f.scope_id = t.scope_id"
    " AND f.node_id = t.node_id AND f.tx_from = ? AND f.source_id = t.source_id"
    " WHERE t.scope_id = ? AND t.source_id = ? AND t.tx_from = ?{half} AND NOT t.erased"
    " AND NOT f.erased AND f.labels = t.labels AND f.properties = t.properties"
)


class SqliteDialect:
    """See :class:`telha.storage.core.dialect.Dialect` for each member's meaning."""

    name = "sqlite"
    null_equal = "IS"
    byte_length = "length"
    #: Statements take a bounded number of parameters (999 in older builds) beside the ones
    #: a query adds.
    in_group: int | None = 500
    span_text = "coalesce(s.text, s.body)"
    #: A row outside its scope's rowid range, which its scope's searches do not read.
    index_checks: tuple[tuple[str, str], ...] = (
        (
            "out_of_range",
            'SELECT scope_id, source_id, version_tx, start, "end" FROM search_spans'
            f" WHERE (rowid >> {SCOPE_ROWID_BITS}) <> scope_id",
        ),
    )
    index_documents: str | None = "SELECT count(*) FROM search_fts_docsize"
    expired_leases_batch = ""
    #: The word index and the substring (trigram) index (docs/architecture.md, "Search").
    fts_tables: tuple[str, ...] = ("search_fts", "search_tri")

    @staticmethod
    def any(column: str, values: Sequence[Any], pg_type: str) -> tuple[str, tuple[Any, ...]]:
        """``column IN (?, …)`` (SQLite's ``IN ()`` matches nothing)."""
        return f"{column} IN ({','.join('?' * len(values))})", tuple(values)

    @staticmethod
    def contains(haystack: str) -> str:
        """``instr(haystack, ?) > 0``."""
        return f"instr({haystack}, ?) > 0"

    @staticmethod
    def blob_append(column: str) -> str:
        """``CAST(column || ? AS BLOB)``."""
        return f"CAST({column} || ? AS BLOB)"

    @staticmethod
    def indexed_by(index: str) -> str:
        """`` INDEXED BY index``."""
        return f" INDEXED BY {index}"

    @staticmethod
    def json_text_elements(expr: str, alias: str) -> str:
        """``json_each(expr) alias``."""
        return f"json_each({expr}) {alias}"

    @staticmethod
    def json_text_field(expr: str, key: str) -> str:
        """``json_extract`` of the bytes read as text, ``NULL`` when they are not JSON."""
        text = f"CAST({expr} AS TEXT)"
        return f"CASE WHEN json_valid({text}) THEN json_extract({text}, '$.{key}') END"

    @staticmethod
    def version_halves(alias: str = "") -> tuple[str, ...]:
        """Open rows, then closed rows (docs/architecture.md, "A version's rows"): a
        version's open rows (``tx_to IS NULL``) are found through ``nodes_by_source``, its
        closed rows through ``closed_nodes_by_version``, so a source's first version, all
        of whose rows are open, enters no by-version index when it is written (those
        entries were a large share of a big first ingest's commit). SQLite plans through a
        partial index only a statement that states the index's condition, so each half
        states its own."""
        col = f"{alias}.tx_to" if alias else "tx_to"
        return (f" AND {col} IS NULL", f" AND {col} IS NOT NULL")

    @staticmethod
    def key_index_condition(column: str) -> str:
        """``nodes_by_key``'s condition: it leaves out the rows whose keys were deferred
        (``DEFERRED``, most of a first version's) or inherited (``INHERITED``, a re-ingested
        stream's matched rows)."""
        return f" AND {column} IS NOT x'{DEFERRED.hex()}' AND {column} IS NOT x'{INHERITED.hex()}'"

    @staticmethod
    def indexed_scope(sid: int) -> bool:
        """Whether the scope has a rowid range."""
        return sid <= MAX_INDEXED_SCOPE

    @staticmethod
    def search_match(terms: list[Term], sid: int) -> tuple[list[Any], list[Any]]:
        """The MATCH expression; the scope's rowid range (FTS5 seeks its doclists to it)."""
        return [fts5_query(terms)], list(scope_rowids(sid))

    @staticmethod
    def search_sql(conds: list[str], *, ranked: bool, newest: bool = False) -> str:
        """FTS5's ``search_fts`` (``bm25`` when ranked: lower is better), joined to
        ``search_spans`` only when a condition reads it. ``newest``: newest first, scored
        when ``ranked`` (the rank window's inner statement)."""
        join = " JOIN search_spans s ON s.rowid = f.rowid" if conds else ""
        extra = "".join(f" AND {c}" for c in [*conds, "f.rowid >= ? AND f.rowid < ?"])
        score = "bm25(search_fts)" if ranked else "0"
        order = "score, f.rowid DESC" if ranked and not newest else "f.rowid"
        return (
            f"SELECT f.rowid AS rowid, {score} AS score FROM search_fts f{join}"
            f" WHERE search_fts MATCH ?{extra} ORDER BY {order} LIMIT ? OFFSET ?"
        )

    @classmethod
    def ranked_window_sql(cls, conds: list[str]) -> str | None:
        """The rank window in one statement: the newest matching rows (FTS5 walks the
        doclists forward from the scope's lowest rowid, the newest row, and stops at the
        window), each scored by ``bm25`` as it is read, then the best from the offset. The
        same rows and order as finding the window's oldest row first and ranking from it on,
        without walking the window twice."""
        inner = cls.search_sql(conds, ranked=True, newest=True)
        return f"SELECT rowid, score FROM ({inner}) ORDER BY score, rowid DESC LIMIT ? OFFSET ?"

    @staticmethod
    def fragment_sql(fragment: str, sid: int, cols: str, conds: list[str]) -> tuple[str, list[Any]]:
        """``search_tri`` (FTS5 ``trigram``) asked for every row holding all of the
        fragment's trigrams, in index order (the newest first), less the rows whose body
        (lower-cased) does not hold the fragment itself: ruled out in the engine, so the
        trigrams found apart (no positions kept) never crowd the rows that hold it out of
        the first ``limit``. A fragment under 3 characters has no trigram: the scope's rows
        are scanned in index order, to ``limit``."""
        lo, hi = scope_rowids(sid)
        extra = "".join(f" AND {c}" for c in conds)
        trigrams = fts5_trigrams(fragment)
        if trigrams is not None:
            sql = (
                f"SELECT {cols} FROM search_tri f JOIN search_spans s ON s.rowid = f.rowid"
                " WHERE search_tri MATCH ? AND f.rowid >= ? AND f.rowid < ?"
                f" AND instr(lower(s.body), ?) > 0{extra} ORDER BY f.rowid LIMIT ?"
            )
            return sql, [trigrams, lo, hi, fragment]
        sql = (
            f"SELECT {cols} FROM search_spans s WHERE s.rowid >= ? AND s.rowid < ?"
            f" AND instr(lower(s.body), ?) > 0{extra} ORDER BY s.rowid LIMIT ?"
        )
        return sql, [lo, hi, fragment]

    @staticmethod
    def search_columns(span: str, length: int) -> tuple[Any, ...]:
        """``(body, text)``: the folded words (:func:`~telha.domain.search_text.fts5_body`),
        and the span's text unless the body is that text already."""
        body = fts5_body(span)
        return body, None if is_verbatim(body, length) else span

    @staticmethod
    def key_table(
        cols: str, types: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> tuple[str, str, list[Any]]:
        """A ``WITH k(cols) AS (VALUES (?, …), …)`` prefix naming ``k``, one row a key."""
        group = "(" + ", ".join("?" * len(types)) + ")"
        prefix = f"WITH k({cols}) AS (VALUES {', '.join([group] * len(keys))}) "
        return prefix, "k", [v for key in keys for v in key]

    @classmethod
    def diff_page(
        cls, sid: int, source_id: bytes, old: int, new: int, after: bytes, limit: int
    ) -> tuple[str, tuple[Any, ...]]:
        """One merge of id-ordered walks, each through an index: both halves of ``new``
        for added and changed ids, both halves of ``old`` for removed ones, each row with
        one primary-key probe into the other version; it stops at ``limit``."""
        news, olds = cls.version_halves("t"), cls.version_halves("f")
        arms = [_ADDED_OR_CHANGED.format(half=h) for h in news]
        arms += [_REMOVED.format(half=h) for h in olds]
        bound = [(sid, source_id, new, after, old)] * len(news)
        bound += [(sid, source_id, old, after, new)] * len(olds)
        sql = " UNION ALL ".join(arms) + " ORDER BY 1 LIMIT ?"
        return sql, (*(p for arm in bound for p in arm), limit)

    @classmethod
    def diff_unchanged(
        cls, sid: int, source_id: bytes, old: int, new: int
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """One count a half of ``new``, each row probing ``old`` by primary key."""
        return [
            (_UNCHANGED.format(half=h), (old, sid, source_id, new)) for h in cls.version_halves("t")
        ]


SQLITE = SqliteDialect()
