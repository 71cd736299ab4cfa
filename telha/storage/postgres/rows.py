"""Writing one version's rows on PostgreSQL.

The rows are built by the engine-neutral :func:`telha.domain.rows.build_rows`; here each
table's rows go in as one ``INSERT … SELECT … FROM unnest($1, $2, …)`` part (one array per
column, whatever the row count), and all parts of a commit as one statement of
data-modifying CTEs (:class:`Batch`): one round trip, inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from telha.domain.rows import VersionRows
from telha.storage.core.row_tables import ROW_TABLES

if TYPE_CHECKING:
    from telha.storage.postgres.tx import Conn

__all__ = ["TAILS", "Batch", "add_rows", "insert_rows"]


class Batch:
    """Several ``INSERT … SELECT … FROM unnest(…)`` parts (and plain statements) sent as one
    statement of data-modifying CTEs: one round trip for every table a commit writes. The parts
    all see the snapshot the statement starts with, so none may depend on another's rows.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._params: list[Any] = []

    def param(self, value: Any, cast: str) -> str:
        """Register one parameter; returns its placeholder (``$n::cast``)."""
        self._params.append(value)
        return f"${len(self._params)}::{cast}"

    def statement(self, sql: str) -> None:
        """A data-modifying statement (its placeholders from :meth:`param`)."""
        self._parts.append(sql)

    def insert(
        self,
        table: str,
        columns: str,
        types: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        tail: str = "",
    ) -> None:
        """``INSERT INTO table (columns) SELECT … FROM unnest(...)`` of ``rows``, one array per
        column (``types`` are the element types); nothing for no rows."""
        if not rows:
            return
        arrays = list(zip(*rows, strict=True))
        params, names, select = [], [], []
        for i, (col, t) in enumerate(zip(arrays, types, strict=True)):
            params.append(self.param(list(col), f"{t}[]"))
            names.append(f"c{i}")
            select.append(f"u.c{i}")
        self.statement(
            f"INSERT INTO {table} ({columns}) SELECT {', '.join(select)}"
            f" FROM unnest({', '.join(params)}) AS u ({', '.join(names)}){tail}"
        )

    async def run(self, conn: Conn) -> None:
        """Send every part as one statement."""
        if not self._parts:
            return
        if len(self._parts) == 1:
            await conn.execute(self._parts[0], *self._params)
            return
        ctes = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(self._parts))
        await conn.execute(f"WITH {ctes} SELECT 1", *self._params)


#: What follows each table's ``INSERT`` (a table not named: nothing): a chunk or an edge equal
#: to one an earlier part wrote is skipped, span rows of the same range merge. The general
#: path and ``telha_commit_single`` (:mod:`telha.storage.postgres.functions`) both use it.
TAILS = {
    "blob_chunks": " ON CONFLICT DO NOTHING",
    "edges": " ON CONFLICT DO NOTHING",
    "span_rows": ' ON CONFLICT (scope_id, source_id, source_version_tx, start, "end")'
    " DO UPDATE SET linked_nodes = span_rows.linked_nodes || excluded.linked_nodes",
}


def add_rows(batch: Batch, rows: VersionRows) -> None:
    """Add ``rows`` to ``batch``: each table of
    :data:`~telha.storage.core.row_tables.ROW_TABLES`, with its :data:`TAILS`."""
    for t in ROW_TABLES:
        batch.insert(t.table, t.names, t.types, getattr(rows, t.field), TAILS.get(t.table, ""))


async def insert_rows(conn: Conn, rows: VersionRows) -> None:
    """Write ``rows`` inside the current transaction, in one statement."""
    batch = Batch()
    add_rows(batch, rows)
    await batch.run(conn)
