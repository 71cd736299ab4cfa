"""Writing one committed version's rows on PostgreSQL (spec 004 apply_parts steps 3–6).

The rows are built by the engine-neutral :func:`telha.storage.rows.build_rows`; here each
table's rows go in as one ``INSERT … SELECT … FROM unnest($1, $2, …)`` statement (one round
trip per table, whatever the row count), inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telha.storage.postgres.base import Conn
from telha.storage.rows import Existing, VersionRows

__all__ = ["current_nodes", "insert_rows", "insert_unnest"]


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


async def insert_unnest(
    conn: Conn,
    table: str,
    columns: str,
    types: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    tail: str = "",
) -> None:
    """``INSERT INTO table (columns) SELECT * FROM unnest(...)`` for every row of ``rows``:
    one statement, one array parameter per column (``types`` are their element types)."""
    if not rows:
        return
    arrays = [list(col) for col in zip(*rows, strict=True)]
    params = ", ".join(f"${i + 1}::{t}[]" for i, t in enumerate(types))
    await conn.execute(
        f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({params}){tail}", *arrays
    )


async def insert_rows(conn: Conn, rows: VersionRows) -> None:
    """Write ``rows`` inside the current transaction (span rows of the same range merge)."""
    await insert_unnest(
        conn, "blob_chunks", "scope_id, blob_id, idx, data",
        ("integer", "bytea", "integer", "bytea"), rows.chunks, " ON CONFLICT DO NOTHING",
    )  # fmt: skip
    if rows.closes:
        await conn.execute(
            "UPDATE nodes SET tx_to = $1 WHERE scope_id = $2 AND node_id = ANY($3::bytea[])"
            " AND tx_to IS NULL",
            rows.tx,
            rows.scope_id,
            rows.closes,
        )
    await insert_unnest(
        conn, "nodes",
        "scope_id, node_id, tx_from, labels, properties, provenance, source_id, valid_from,"
        " valid_to",
        ("integer", "bytea", "bigint", "text", "bytea", "bytea", "bytea", "bigint", "bigint"),
        rows.nodes,
    )  # fmt: skip
    await insert_unnest(
        conn, "node_labels", "scope_id, label, node_id, tx_from",
        ("integer", "text", "bytea", "bigint"), rows.labels,
    )  # fmt: skip
    await insert_unnest(
        conn, "edges", "scope_id, edge_id, tx_from, type, from_id, to_id, properties",
        ("integer", "bytea", "bigint", "text", "bytea", "bytea", "bytea"), rows.edges,
    )  # fmt: skip
    await insert_unnest(
        conn, "span_rows",
        'scope_id, source_id, source_version_tx, start, "end", kind, linked_nodes',
        ("integer", "bytea", "bigint", "bigint", "bigint", "text", "bytea"), rows.spans,
        " ON CONFLICT (scope_id, source_id, source_version_tx, start, \"end\") DO UPDATE SET"
        " linked_nodes = span_rows.linked_nodes || excluded.linked_nodes",
    )  # fmt: skip
    await insert_unnest(
        conn, "ambiguities",
        "scope_id, node_id, tx, source_id, kind, candidates, detector_confidence,"
        " applied_candidate_confidence, severity_hint",
        ("integer", "bytea", "bigint", "bytea", "text", "bytea", "float8", "float8", "text"),
        rows.ambiguities,
    )  # fmt: skip
