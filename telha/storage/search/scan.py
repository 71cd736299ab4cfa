"""The full-text index against the span rows, for ``telha check`` (``search_index``), written
once for both engines: what :func:`telha.storage.search.index.sync_source` keeps must
hold in any snapshot (docs/operations.md, "The consistency check")."""

from __future__ import annotations

from dataclasses import dataclass, field

from telha.storage.core.tx import SnapshotTx

__all__ = ["SearchProblems", "search_problems"]

#: The source's current version: its latest published one, neither retired nor erased.
_CURRENT = (
    "EXISTS (SELECT 1 FROM source_versions v WHERE v.scope_id = {a}.scope_id"
    " AND v.source_id = {a}.source_id AND v.tx = {a}.{tx} AND v.published_tx IS NOT NULL"
    " AND v.retired_tx IS NULL AND v.erased_at IS NULL AND NOT EXISTS (SELECT 1"
    " FROM source_versions w WHERE w.scope_id = v.scope_id AND w.source_id = v.source_id"
    " AND w.published_tx IS NOT NULL AND w.tx > v.tx))"
)
_KEY = 'scope_id, source_id, {tx}, start, "end"'
#: ``(kind, sql)``: each selects the key of an offending row.
_CHECKS = (
    (
        "stale",  # an index row of no current version's span row, not waiting for deletion
        f"SELECT {_KEY.format(tx='version_tx')} FROM search_spans s WHERE NOT ("
        + _CURRENT.format(a="s", tx="version_tx")
        + " AND EXISTS (SELECT 1 FROM span_rows r WHERE r.scope_id = s.scope_id"
        " AND r.source_id = s.source_id AND r.source_version_tx = s.version_tx"
        ' AND r.start = s.start AND r."end" = s."end"))'
        " AND NOT EXISTS (SELECT 1 FROM search_stale x WHERE x.scope_id = s.scope_id"
        " AND x.source_id = s.source_id AND x.version_tx = s.version_tx)",
    ),
    (
        "duplicate",
        f"SELECT {_KEY.format(tx='version_tx')} FROM search_spans"
        f" GROUP BY {_KEY.format(tx='version_tx')} HAVING count(*) > 1",
    ),
    (
        "missing",  # a current version's span row without its index row, not being filled
        # (nor failed: listed as such)
        f"SELECT {_KEY.format(tx='source_version_tx')} FROM span_rows r WHERE "
        + _CURRENT.format(a="r", tx="source_version_tx")
        + " AND NOT EXISTS (SELECT 1 FROM search_sources p WHERE p.scope_id = r.scope_id"
        " AND p.source_id = r.source_id AND p.version_tx = r.source_version_tx"
        " AND (NOT p.done OR p.failure IS NOT NULL))"
        " AND NOT EXISTS (SELECT 1 FROM search_spans s WHERE s.scope_id = r.scope_id"
        " AND s.source_id = r.source_id AND s.version_tx = r.source_version_tx"
        ' AND s.start = r.start AND s."end" = r."end")',
    ),
)


@dataclass
class SearchProblems:
    """What ``telha check`` finds in the index: whether it is kept (``enabled``), how many
    index rows it compared (``rows``), and per kind (``stale``, ``duplicate``, ``missing``,
    ``fts_rows``) how many offend and the first keys ``(scope, source_id, tx, start,
    end)``."""

    enabled: bool
    rows: int
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[tuple[int, bytes, int, int, int]]] = field(default_factory=dict)
    #: Versions the index could not be filled with: ``(scope, source_id, tx, reason)``, the
    #: first ``limit`` (their count is ``counts["failed"]``).
    failed: list[tuple[int, bytes, int, str]] = field(default_factory=list)


async def search_problems(tx: SnapshotTx, limit: int) -> SearchProblems:
    """Compare the index with the span rows of every current version: no index row of a
    span row that is not current (superseded, retired, erased, or gone) unless its version
    waits for deletion (``search_stale``), none twice, and — while the index is kept — none
    missing of a version not being filled (``search_sources``); on SQLite the FTS5 index
    has one document per row; and the versions it could not be filled with
    (``search_sources.failure``, docs/operations.md, "Bad rows")."""
    state = await tx.fetchall("SELECT enabled FROM search_state")
    enabled = bool(state and state[0][0])
    total = await tx.fetchall("SELECT count(*) FROM search_spans")
    found = SearchProblems(enabled, int(total[0][0]))
    checks = (*_CHECKS, *tx.dialect.index_checks)
    for kind, sql in checks:
        if kind == "missing" and not enabled:
            continue
        count = await tx.fetchall(f"SELECT count(*) FROM ({sql}) x")
        found.counts[kind] = int(count[0][0])
        if found.counts[kind]:
            rows = await tx.fetchall(f"{sql} LIMIT {int(limit)}")
            found.examples[kind] = [
                (int(a), bytes(b), int(c), int(d), int(e)) for a, b, c, d, e in rows
            ]
    count = await tx.fetchall("SELECT count(*) FROM search_sources WHERE failure IS NOT NULL")
    found.counts["failed"] = int(count[0][0])
    if found.counts["failed"]:
        rows = await tx.fetchall(
            "SELECT scope_id, source_id, version_tx, failure FROM search_sources"
            f" WHERE failure IS NOT NULL ORDER BY scope_id, source_id LIMIT {int(limit)}"
        )
        found.failed = [(int(a), bytes(b), int(c), str(d)) for a, b, c, d in rows]
    if tx.dialect.index_documents is not None:
        docs = await tx.fetchall(tx.dialect.index_documents)
        found.counts["fts_rows"] = abs(int(docs[0][0]) - found.rows)
    return found
