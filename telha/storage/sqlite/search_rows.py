"""Writing full-text index rows on SQLite (docs/architecture.md, "Search"): each scope's
``search_spans`` rows take rowids in the scope's own range, newest lowest
(:func:`telha.domain.search_query.scope_rowids`: a search names the range), and the FTS5
tables over their body (the words, ``search_fts``; the substrings, ``search_tri``) are kept
in the same transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from telha.domain.errors import StorageError
from telha.domain.search_query import MAX_INDEXED_SCOPE, scope_rowids
from telha.storage.core.row_tables import SEARCH_COLS
from telha.storage.sqlite.dialect import SQLITE

__all__ = ["insert_search_rows"]

_INSERT = f"INSERT INTO search_spans (rowid, {SEARCH_COLS}, body, text) VALUES ({'?, ' * 11}?)"


def insert_search_rows(
    conn: sqlite3.Connection, sid: int, rows: Sequence[tuple[Any, ...]], lowest: dict[int, int]
) -> None:
    """Write scope ``sid``'s index ``rows``
    (:data:`~telha.storage.core.row_tables.SEARCH_COLS`, body, text) at the ``len(rows)``
    rowids just below the scope's lowest, the first row taking the highest of them (as if the
    whole range were counted down), and their body into each FTS5 table.
    ``lowest``: the lowest rowid this transaction gave each scope (read and updated: its
    later rows need not read it again).

    :raises StorageError: the rows would not fit in the scope's range (2^40 rows), or the
        scope has no range (over :data:`~telha.domain.search_query.MAX_INDEXED_SCOPE`).
    """
    below = lowest.get(sid)
    if below is None or below - len(rows) < scope_rowids(sid)[0]:
        below = _lowest_rowid(conn, sid, len(rows))
    first = below - len(rows)
    lowest[sid] = first
    conn.executemany(_INSERT, [(below - 1 - i, *r) for i, r in enumerate(rows)])
    for table in SQLITE.fts_tables:
        conn.execute(
            f"INSERT INTO {table} (rowid, body) SELECT rowid, body FROM search_spans"
            " WHERE rowid >= ? AND rowid < ?",
            (first, below),
        )


def _lowest_rowid(conn: sqlite3.Connection, sid: int, count: int) -> int:
    """The lowest rowid of the scope's index rows (its range's high end when it has none):
    its next rows take the ``count`` rowids just below it, in its own range.

    :raises StorageError: as :func:`insert_search_rows`.
    """
    if sid > MAX_INDEXED_SCOPE:
        raise StorageError(f"scope {sid}: over the full-text index's {MAX_INDEXED_SCOPE} scopes")
    lo, hi = scope_rowids(sid)
    row = conn.execute(
        "SELECT min(rowid) FROM search_spans WHERE rowid >= ? AND rowid < ?", (lo, hi)
    ).fetchone()
    low = hi if row is None or row[0] is None else int(row[0])
    if low - count < lo:
        raise StorageError(f"scope {sid}: its full-text index rowids are used up")
    return low
