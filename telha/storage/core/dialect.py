"""Where the engines' SQL differs: the :class:`Dialect` every transaction carries.

The operations of :mod:`telha.storage.core` are written once for both engines against
:class:`~telha.storage.core.tx.Tx` (docs/architecture.md, "The storage seam"). Each place
where SQLite's and PostgreSQL's text, functions or planners differ is a named member of
:class:`Dialect`, implemented by each engine beside its transaction
(:mod:`telha.storage.sqlite.dialect`, :mod:`telha.storage.postgres.dialect`) — an operation
asks its transaction's dialect (``tx.dialect``), never which engine it runs on. The dialect
is pure: it builds SQL text and parameters and runs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from telha.domain.search_query import Term

__all__ = ["Dialect"]


class Dialect(Protocol):
    """The SQL text one engine writes where the two differ. Every method is a pure function
    of its arguments and raises nothing unless its docstring says so; ``?`` placeholders
    throughout (PostgreSQL's driver numbers them). A condition a method returns is bare
    (``a = b``) unless its docstring says it starts with `` AND``. Names and keys pasted
    into the SQL (columns, aliases, JSON keys, index names) are the caller's literals, never
    user input."""

    #: ``"sqlite"`` or ``"postgres"``: for log lines and the tests' engine-specific
    #: expectations, never for choosing SQL (add a member here instead).
    name: str
    #: The comparison under which ``NULL`` equals ``NULL``: ``IS`` / ``IS NOT DISTINCT FROM``.
    null_equal: str
    #: The function giving a ``BLOB``/``bytea`` value's length in bytes.
    byte_length: str
    #: Most values (or keys) one list binds one by one — an ``IN`` list of :meth:`any`
    #: (:func:`~telha.storage.core.tx.any_groups`), a ``VALUES`` list of :meth:`key_table` —
    #: or ``None`` when both bind any number as arrays, one parameter a column.
    in_group: int | None
    #: The expression of an index row ``s``'s span text (``search_spans.text``, which SQLite
    #: leaves ``NULL`` when the body is that text).
    span_text: str
    #: ``(kind, sql)`` checks of the engine's own full-text index for ``telha check``, each
    #: selecting the key ``(scope_id, source_id, version_tx, start, end)`` of an offending
    #: ``search_spans`` row (SQLite: a row outside its scope's rowid range).
    index_checks: tuple[tuple[str, str], ...]
    #: A query counting the documents the engine's external full-text table holds (one per
    #: ``search_spans`` row), or ``None`` when the index is a column of those rows.
    index_documents: str | None
    #: What follows ``… WHERE j.state = 'leased' AND j.lease_deadline < ?`` when the lease
    #: sweep selects expired jobs ``j``: on PostgreSQL at most 500, locked, the rows other
    #: transactions hold skipped; on SQLite every one (its single writer holds every row).
    expired_leases_batch: str
    #: The external full-text tables kept beside ``search_spans`` (SQLite's FTS5 tables,
    #: which rows leave explicitly and which ``optimize`` rewrites); none on PostgreSQL.
    fts_tables: tuple[str, ...]

    def any(self, column: str, values: Sequence[Any], pg_type: str) -> tuple[str, tuple[Any, ...]]:
        """``(condition, params)`` for ``column`` being one of ``values``: ``col IN (?, …)``
        on SQLite, ``col = ANY(?::pg_type[])`` on PostgreSQL. An empty ``values`` matches
        nothing on both."""

    def contains(self, haystack: str) -> str:
        """A condition: the text or bytes ``haystack`` (an SQL expression) holds the next
        parameter (``?``) somewhere."""

    def blob_append(self, column: str) -> str:
        """``column`` (a ``BLOB``/``bytea`` column) with the next parameter's bytes appended,
        still a ``BLOB`` (SQLite's ``||`` yields ``TEXT``: it is cast back)."""

    def indexed_by(self, index: str) -> str:
        """`` INDEXED BY index`` on SQLite (its planner, without ANALYZE statistics, would
        search a partial index's table by the primary key's ``scope_id`` alone), nothing on
        PostgreSQL."""

    def json_text_elements(self, expr: str, alias: str) -> str:
        """A table source: the elements of the JSON array ``expr`` (stored text) as rows of
        ``alias`` with a text column ``value``."""

    def json_text_field(self, expr: str, key: str) -> str:
        """The text field ``key`` of the JSON object stored as UTF-8 bytes in ``expr``;
        ``NULL`` when the bytes are not JSON (SQLite) — PostgreSQL raises on them."""

    def version_halves(self, alias: str = "") -> tuple[str, ...]:
        """The conditions, each `` AND …``, that split a read of one version's node rows
        (``alias``: the ``nodes`` table's alias, or none) into parts each planned through an
        index (docs/architecture.md, "A version's rows"); together they read every row
        exactly once."""

    def key_index_condition(self, column: str) -> str:
        """The condition, `` AND …``, under which the planner may probe ``column`` through
        ``nodes_by_key`` (SQLite's index is partial: it leaves out deferred and inherited
        keys, and is used only when a query states that); empty on PostgreSQL."""

    def key_table(
        self, cols: str, types: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> tuple[str, str, list[Any]]:
        """``(prefix, table, params)``: ``keys`` (tuples, one value a column, ``types`` their
        PostgreSQL array types; at most :attr:`in_group` of them) as a table ``k(cols)`` a
        statement joins — ``prefix`` goes before the statement (SQLite's ``WITH … AS
        (VALUES …)``), ``table`` where the table is named.

        :raises ValueError: the keys are not all as long as ``types`` (PostgreSQL).
        """

    def indexed_scope(self, sid: int) -> bool:
        """Whether scope ``sid`` can have full-text index rows (SQLite gives each scope a
        rowid range, :func:`~telha.domain.search_query.scope_rowids`: a scope over
        ``MAX_INDEXED_SCOPE`` has none; PostgreSQL's index is a column of its rows)."""

    def search_match(self, terms: list[Term], sid: int) -> tuple[list[Any], list[Any]]:
        """The parameters a search statement binds before its conditions' (the query:
        FTS5's MATCH expression, or the ``tsquery`` and the scope id) and after them (SQLite:
        the scope's rowid range) for ``terms`` in scope ``sid`` (:meth:`indexed_scope`)."""

    def search_sql(self, conds: list[str], *, ranked: bool) -> str:
        """A statement selecting ``(rowid, score)`` of the scope's index rows ``s``
        matching the query and every condition of ``conds``, then ``LIMIT ? OFFSET ?``:
        ``ranked``, best first, ties oldest first (SQLite numbers a scope's rows from the top
        of its range down: :func:`~telha.domain.search_query.scope_rowids`); else unscored
        (score 0) in index order (SQLite: newest first)."""

    def ranked_window_sql(self, conds: list[str]) -> str | None:
        """As :meth:`search_sql` ranked, but ranking only the newest matches (``[search]
        rank_window``): the newest ``?`` rows (then ``0``, an inner offset) scored, the best
        ``LIMIT ? OFFSET ?`` of them, ties oldest first. ``None`` where every match is
        ranked (PostgreSQL: finding the newest would read every match's row first, which is
        most of what ranking them costs there)."""

    def fragment_sql(
        self, fragment: str, sid: int, cols: str, conds: list[str]
    ) -> tuple[str, list[Any]]:
        """``(sql, params)``: a statement selecting ``cols`` of scope ``sid``'s index rows
        ``s`` whose folded words hold ``fragment`` (lower-case) and meet every condition of
        ``conds``, then ``LIMIT ?``; ``params`` are bound before the conditions'
        (:func:`telha.storage.search.candidates.containing`; ``sid``:
        :meth:`indexed_scope`)."""

    def search_columns(self, span: str, length: int) -> tuple[Any, ...]:
        """The last columns of a span's ``search_spans`` row, after
        :data:`~telha.storage.core.row_tables.SEARCH_COLS`, from its text ``span``
        (``length`` bytes): SQLite's ``body`` (the folded words FTS5 indexes, and
        ``search_tri`` their trigrams) and ``text`` (``NULL`` when the body is that text
        already); PostgreSQL's ``body`` (the words' ``tsvector``), ``text`` and ``words``
        (the distinct folded words, space-separated: the ``pg_trgm`` index's text). So a
        hit reads its text from its index row."""

    def diff_page(
        self, sid: int, source_id: bytes, old: int, new: int, after: bytes, limit: int
    ) -> tuple[str, tuple[Any, ...]]:
        """``(sql, params)``: the first ``limit`` node ids after ``after``, in id order, that
        differ between versions ``old`` and ``new`` of the source (a row in one only, or
        rows whose labels or properties differ; erased rows left out) — one page of
        :func:`telha.storage.reads.diff.version_diff`. ``old`` is ``-1`` for no version."""

    def diff_unchanged(
        self, sid: int, source_id: bytes, old: int, new: int
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """Statements ``(sql, params)`` each giving one count; their sum is the number of
        node ids whose rows are equal in versions ``old`` and ``new``."""
