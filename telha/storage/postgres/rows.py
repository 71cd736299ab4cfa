"""Writing one committed version's rows on PostgreSQL (spec 004 apply_parts steps 3–6).

The rows are built by the engine-neutral :func:`telha.domain.rows.build_rows`; here each
table's rows go in as one ``INSERT … SELECT … FROM unnest($1, $2, …)`` part (one array per
column, whatever the row count), and all parts of a commit as one statement of
data-modifying CTEs (:class:`Batch`): one round trip, inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from telha.domain.rows import Existing, VersionRows

if TYPE_CHECKING:
    from telha.storage.postgres.tx import Conn

__all__ = [
    "PENDING_TX",
    "TX",
    "Batch",
    "add_rows",
    "current_nodes",
    "insert_rows",
    "insert_unnest",
]


async def current_nodes(conn: Conn, sid: int, ids: list[bytes]) -> Existing:
    """Current ``(labels JSON, properties JSON, valid_from, valid_to, tx_from)`` of the given
    node ids (the upsert ladder), read inside the caller's transaction. The rows are locked
    (``FOR UPDATE``) so a concurrent commit cannot close them between this read and our write.
    """
    rows = await conn.fetch(
        "SELECT node_id, labels, properties, valid_from, valid_to, tx_from FROM nodes"
        " WHERE scope_id = $1 AND tx_to IS NULL AND node_id = ANY($2::bytea[])"
        " ORDER BY node_id FOR UPDATE",
        sid,
        ids,
    )
    return {r[0]: (r[1], r[2], r[3], r[4], r[5]) for r in rows}


#: Inside a :class:`Batch` that takes the transaction time: the value the clock row gave it.
TX = "(SELECT tx FROM clock)"

#: The tx :func:`~telha.domain.rows.build_rows` is given when the batch takes the real one
#: (µs; later than any real time, so the upsert ladder treats every node as written before).
PENDING_TX = 1 << 62

_CLOCK = (
    "clock AS (UPDATE tx_clock SET tx = greatest(tx + 1,"
    " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) WHERE id = 1 RETURNING tx)"
)


class Batch:
    """Several ``INSERT … SELECT … FROM unnest(…)`` parts (and plain statements) sent as one
    statement of data-modifying CTEs: one round trip for every table a commit writes. The parts
    all see the snapshot the statement starts with, so none may depend on another's rows.

    :param take_tx: the statement also takes the next transaction time (µs) from the clock
        row, ``greatest(last + 1, clock_timestamp() in µs)``, and writes it into every part's
        tx column (:data:`TX`); :meth:`run` returns it. The row stays locked until the
        transaction ends, so transaction times are strictly increasing across every replica
        and commits are ordered by them; it is locked only from this statement to the commit,
        not while the rows are built. Take it after every other lock.
    """

    def __init__(self, *, take_tx: bool = False) -> None:
        self._parts: list[str] = []
        self._params: list[Any] = []
        self.take_tx = take_tx

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
        *,
        tx_column: int | None = None,
    ) -> None:
        """``INSERT INTO table (columns) SELECT … FROM unnest(...)`` of ``rows``, one array per
        column (``types`` are the element types); nothing for no rows. With ``take_tx``,
        column ``tx_column`` is written from the clock instead of the rows."""
        if not rows:
            return
        if not self.take_tx:
            tx_column = None
        arrays = list(zip(*rows, strict=True))
        params, names, select = [], [], []
        for i, (col, t) in enumerate(zip(arrays, types, strict=True)):
            if i == tx_column:
                select.append(TX)
                continue
            params.append(self.param(list(col), f"{t}[]"))
            names.append(f"c{i}")
            select.append(f"u.c{i}")
        self.statement(
            f"INSERT INTO {table} ({columns}) SELECT {', '.join(select)}"
            f" FROM unnest({', '.join(params)}) AS u ({', '.join(names)}){tail}"
        )

    async def run(self, conn: Conn) -> int | None:
        """Send every part as one statement; returns the transaction time taken (µs) with
        ``take_tx``, else ``None``."""
        if self.take_tx:
            ctes = ", ".join([_CLOCK, *(f"w{i} AS ({p})" for i, p in enumerate(self._parts))])
            return int(await conn.fetchval(f"WITH {ctes} SELECT tx FROM clock", *self._params))
        if not self._parts:
            return None
        if len(self._parts) == 1:
            await conn.execute(self._parts[0], *self._params)
            return None
        ctes = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(self._parts))
        await conn.execute(f"WITH {ctes} SELECT 1", *self._params)
        return None


async def insert_unnest(
    conn: Conn,
    table: str,
    columns: str,
    types: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    tail: str = "",
) -> None:
    """One :meth:`Batch.insert`, sent on its own."""
    batch = Batch()
    batch.insert(table, columns, types, rows, tail)
    await batch.run(conn)


def add_rows(batch: Batch, rows: VersionRows) -> None:
    """Add ``rows`` to ``batch``: chunks, closes of upserted nodes, node versions, labels,
    edges, span rows (those of the same range merge) and ambiguities."""
    batch.insert(
        "blob_chunks", "scope_id, blob_id, idx, data",
        ("integer", "bytea", "integer", "bytea"), rows.chunks, " ON CONFLICT DO NOTHING",
    )  # fmt: skip
    if rows.closes:
        # Closes rows that exist before this statement; the new versions below are not seen.
        tx = TX if batch.take_tx else batch.param(rows.tx, "bigint")
        batch.statement(
            f"UPDATE nodes SET tx_to = {tx}"
            f" WHERE scope_id = {batch.param(rows.scope_id, 'integer')}"
            f" AND node_id = ANY({batch.param(rows.closes, 'bytea[]')}) AND tx_to IS NULL"
        )
    batch.insert(
        "nodes",
        "scope_id, node_id, tx_from, labels, properties, provenance, source_id, valid_from,"
        " valid_to",
        ("integer", "bytea", "bigint", "text", "bytea", "bytea", "bytea", "bigint", "bigint"),
        rows.nodes,
        tx_column=2,
    )
    batch.insert(
        "node_labels", "scope_id, label, node_id, tx_from",
        ("integer", "text", "bytea", "bigint"), rows.labels, tx_column=3,
    )  # fmt: skip
    batch.insert(
        "edges", "scope_id, edge_id, tx_from, type, from_id, to_id, properties",
        ("integer", "bytea", "bigint", "text", "bytea", "bytea", "bytea"), rows.edges,
        tx_column=2,
    )  # fmt: skip
    batch.insert(
        "span_rows",
        'scope_id, source_id, source_version_tx, start, "end", kind, linked_nodes',
        ("integer", "bytea", "bigint", "bigint", "bigint", "text", "bytea"),
        rows.spans,
        ' ON CONFLICT (scope_id, source_id, source_version_tx, start, "end") DO UPDATE SET'
        " linked_nodes = span_rows.linked_nodes || excluded.linked_nodes",
        tx_column=2,
    )
    batch.insert(
        "ambiguities",
        "scope_id, node_id, tx, source_id, kind, candidates, detector_confidence,"
        " applied_candidate_confidence, severity_hint",
        ("integer", "bytea", "bigint", "bytea", "text", "bytea", "float8", "float8", "text"),
        rows.ambiguities,
        tx_column=2,
    )


async def insert_rows(conn: Conn, rows: VersionRows) -> None:
    """Write ``rows`` inside the current transaction, in one statement."""
    batch = Batch()
    add_rows(batch, rows)
    await batch.run(conn)
