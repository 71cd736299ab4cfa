"""Writing one version's rows on SQLite: the rows are built by the engine-neutral
:func:`telha.domain.rows.build_rows` (re-exported here) and written here, inside the writer's
transaction, as multi-row statements (:func:`insert_batched`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from typing import Any

from telha.domain.identity import DEFERRED
from telha.domain.rows import VersionRows, build_rows
from telha.storage.core.row_tables import ROW_TABLES

__all__ = ["VersionRows", "build_rows", "insert_batched", "insert_rows"]


#: Most rows in one multi-row ``INSERT`` (a power of two; rows × columns stays under SQLite's
#: 32,766 bound parameters for up to 15 columns).
_MAX_BATCH = 2048


def insert_batched(
    conn: sqlite3.Connection,
    head: str,
    rows: Sequence[tuple[Any, ...]],
    tail: str = "",
    *,
    last: str | None = None,
) -> None:
    """``head`` (``INSERT INTO t (c1, …) VALUES``) for every row of ``rows``, as multi-row
    statements of power-of-two sizes (at most :data:`_MAX_BATCH` rows; every size's SQL is
    prepared once and cached by the driver). ``last``: an SQL literal written for the last
    column of every row in place of its value (which every row must hold), so that column
    is not bound row by row.

    Why not ``executemany``: it releases and re-takes the GIL around every row's step, and
    each re-take waits for whichever thread holds it (up to the 5 ms switch interval). With
    a busy in-process worker thread that made a 10,000-row insert take seconds (measured:
    42 s under a spinning thread, 143 ms as multi-row statements; ~60 ms alone either way).
    """
    if not rows:
        return
    ncols = len(rows[0])
    pos, total = 0, len(rows)
    size = _MAX_BATCH
    while pos < total:
        while size > total - pos:
            size //= 2
        params = list(chain.from_iterable(rows[pos : pos + size]))
        if last is not None:
            del params[ncols - 1 :: ncols]
        conn.execute(_batch_sql(head, tail, ncols, size, last), params)
        pos += size


@lru_cache(maxsize=256)
def _batch_sql(head: str, tail: str, ncols: int, size: int, last: str | None) -> str:
    marks = ["?"] * ncols if last is None else ["?"] * (ncols - 1) + [last]
    group = "(" + ", ".join(marks) + ")"
    return f"{head} {', '.join([group] * size)}{tail}"


#: The SQL literal of :data:`telha.domain.identity.DEFERRED`.
_DEFERRED_SQL = f"x'{DEFERRED.hex()}'"
_match_key = itemgetter(9)


def _keys_deferred(nodes: list[tuple[Any, ...]]) -> bool:
    """Whether every node row's match key (its last column) is ``DEFERRED``: a source's
    first whole version. Its rows are then written with the key as a literal, not a bound
    parameter: about 6 % of a 10,000-row JSON batch's insert time (bench/RESULTS.md,
    "Deferred keys as a literal")."""
    return set(map(_match_key, nodes)) == {DEFERRED}


_TABLES = {t.field: t for t in ROW_TABLES}


def _head(field: str, verb: str = "INSERT") -> str:
    """``verb INTO table (columns) VALUES`` of one table of a version's rows."""
    t = _TABLES[field]
    return f"{verb} INTO {t.table} ({t.names}) VALUES"


def insert_rows(conn: sqlite3.Connection, rows: VersionRows) -> None:
    """Write ``rows`` inside the current transaction (span rows of the same range merge)."""
    conn.executemany(f"{_head('chunks', 'INSERT OR IGNORE')} (?, ?, ?, ?)", rows.chunks)
    last = _DEFERRED_SQL if _keys_deferred(rows.nodes) else None
    insert_batched(conn, _head("nodes"), rows.nodes, last=last)
    insert_batched(conn, _head("labels"), rows.labels)
    # An edge equal in every field to one an earlier part of the stream wrote.
    insert_batched(conn, _head("edges"), rows.edges, " ON CONFLICT DO NOTHING")
    insert_batched(
        conn,
        _head("spans"),
        rows.spans,
        # || yields TEXT; the cast keeps the bytes a BLOB of 16-byte ids.
        " ON CONFLICT DO UPDATE SET"
        " linked_nodes = CAST(linked_nodes || excluded.linked_nodes AS BLOB)",
    )
    insert_batched(conn, _head("ambiguities"), rows.ambiguities)
