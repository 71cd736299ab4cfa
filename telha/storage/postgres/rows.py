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

if TYPE_CHECKING:
    from telha.storage.postgres.tx import Conn

__all__ = ["Batch", "add_rows", "insert_rows"]


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


def add_rows(batch: Batch, rows: VersionRows) -> None:
    """Add ``rows`` to ``batch``: chunks, node versions, labels, edges (one equal to an
    earlier part's skipped), span rows (those of the same range merge) and ambiguities."""
    batch.insert(
        "blob_chunks", "scope_id, blob_id, idx, data",
        ("integer", "bytea", "integer", "bytea"), rows.chunks, " ON CONFLICT DO NOTHING",
    )  # fmt: skip
    batch.insert(
        "nodes",
        "scope_id, node_id, tx_from, labels, properties, provenance, source_id, valid_from,"
        " valid_to, match_key",
        (
            "integer",
            "bytea",
            "bigint",
            "text",
            "bytea",
            "bytea",
            "bytea",
            "bigint",
            "bigint",
            "bytea",
        ),
        rows.nodes,
    )
    batch.insert(
        "node_labels", "scope_id, label, node_id, tx_from",
        ("integer", "text", "bytea", "bigint"), rows.labels,
    )  # fmt: skip
    batch.insert(
        "edges", "scope_id, edge_id, tx_from, type, from_id, to_id, properties, source_id",
        ("integer", "bytea", "bigint", "text", "bytea", "bytea", "bytea", "bytea"), rows.edges,
        " ON CONFLICT DO NOTHING",
    )  # fmt: skip
    batch.insert(
        "span_rows",
        'scope_id, source_id, source_version_tx, start, "end", kind, linked_nodes',
        ("integer", "bytea", "bigint", "bigint", "bigint", "text", "bytea"),
        rows.spans,
        ' ON CONFLICT (scope_id, source_id, source_version_tx, start, "end") DO UPDATE SET'
        " linked_nodes = span_rows.linked_nodes || excluded.linked_nodes",
    )
    batch.insert(
        "ambiguities",
        "scope_id, node_id, tx, source_id, kind, candidates, detector_confidence,"
        " applied_candidate_confidence, severity_hint",
        ("integer", "bytea", "bigint", "bytea", "text", "bytea", "float8", "float8", "text"),
        rows.ambiguities,
    )


async def insert_rows(conn: Conn, rows: VersionRows) -> None:
    """Write ``rows`` inside the current transaction, in one statement."""
    batch = Batch()
    add_rows(batch, rows)
    await batch.run(conn)
