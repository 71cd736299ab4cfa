"""How a statement reads every node row one source version wrote (docs/architecture.md,
"Versions and node identity", "A version's rows"), written once for both engines.

On SQLite a version's rows are found through two partial indexes: its open rows through
``nodes_by_source`` (``tx_to IS NULL``), its closed rows through ``closed_nodes_by_version``
(``tx_to IS NOT NULL``). So a source's first version, all of whose rows are open, enters no
by-version index when it is written: those entries were a large share of a big first
ingest's commit (bench/RESULTS.md, "Closed rows only in the by-version index").
SQLite plans through a partial index only a statement that states the index's condition, so
a statement that reads all of a version's rows runs once for each half, each half stating its
condition. PostgreSQL's ``nodes_by_source_tx`` holds every row: one statement, no condition.
"""

from __future__ import annotations

from telha.storage.core.tx import Tx

__all__ = ["version_halves"]


def version_halves(tx: Tx, alias: str = "") -> tuple[str, ...]:
    """The conditions, each `` AND …``, that split a read of one version's node rows
    (``alias``: the ``nodes`` table's alias in the statement, or none) into parts each planned
    through an index: ``(open rows, closed rows)`` on SQLite, ``("",)`` on PostgreSQL.
    Together the parts read every row exactly once."""
    if tx.postgres:
        return ("",)
    col = f"{alias}.tx_to" if alias else "tx_to"
    return (f" AND {col} IS NULL", f" AND {col} IS NOT NULL")
