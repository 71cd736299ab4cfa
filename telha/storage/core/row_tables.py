"""The tables one version's rows go into, each with the columns of
:func:`telha.domain.rows.build_rows`'s tuples in their order (docs/architecture.md, "A
version's rows"), written once: each engine's ``rows.py`` writes the tuples under these column
names, and PostgreSQL's ``telha_commit_single`` takes them as arrays of row types whose fields
are these columns (``tests/integration/test_pg_fast_paths.py`` holds the two to each other).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

__all__ = ["ROW_TABLES", "SEARCH_COLS", "RowTable"]

#: The columns of a full-text index row (``search_spans``) every engine writes, in the order
#: :func:`telha.storage.search.index.index_pending` builds them; the dialect's
#: :meth:`~telha.storage.core.dialect.Dialect.search_columns` follow.
SEARCH_COLS = 'scope_id, source_id, version_tx, start, "end", kind, linked_nodes, labels, format'


@dataclass(frozen=True)
class RowTable:
    """One table of a version's rows."""

    #: The :class:`telha.domain.rows.VersionRows` field holding its tuples.
    field: str
    table: str
    #: ``column type, …`` in the tuples' order (types PostgreSQL's).
    spec: str
    #: The column holding the version's tx (``None``: the rows are the blob's, of no tx).
    tx_column: str | None

    @cached_property
    def columns(self) -> tuple[tuple[str, str], ...]:
        """``(column, PostgreSQL type)`` in the tuples' order."""
        pairs = (c.split() for c in self.spec.split(","))
        return tuple((name, pg_type) for name, pg_type in pairs)

    @cached_property
    def names(self) -> str:
        """The column list of an ``INSERT`` (``"end"`` quoted)."""
        return ", ".join(_quoted(name) for name, _ in self.columns)

    @cached_property
    def types(self) -> tuple[str, ...]:
        """The columns' PostgreSQL types, in order."""
        return tuple(t for _, t in self.columns)


def _quoted(name: str) -> str:
    return f'"{name}"' if name == "end" else name


ROW_TABLES = (
    RowTable(
        "chunks", "blob_chunks", "scope_id integer, blob_id bytea, idx integer, data bytea", None
    ),
    RowTable(
        "nodes",
        "nodes",
        "scope_id integer, node_id bytea, tx_from bigint, labels text, properties bytea,"
        " provenance bytea, source_id bytea, valid_from bigint, valid_to bigint, match_key bytea",
        "tx_from",
    ),
    RowTable(
        "labels",
        "node_labels",
        "scope_id integer, label text, node_id bytea, tx_from bigint",
        "tx_from",
    ),
    RowTable(
        "edges",
        "edges",
        "scope_id integer, edge_id bytea, tx_from bigint, type text, from_id bytea, to_id bytea,"
        " properties bytea, source_id bytea",
        "tx_from",
    ),
    RowTable(
        "spans",
        "span_rows",
        "scope_id integer, source_id bytea, source_version_tx bigint, start bigint, end bigint,"
        " kind text, linked_nodes bytea",
        "source_version_tx",
    ),
    RowTable(
        "ambiguities",
        "ambiguities",
        "scope_id integer, node_id bytea, tx bigint, source_id bytea, kind text,"
        " candidates bytea, detector_confidence float8, applied_candidate_confidence float8,"
        " severity_hint text",
        "tx",
    ),
)
