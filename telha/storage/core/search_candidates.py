"""What a search or locate is narrowed to, and a locate's candidate span rows found by the
substring index (docs/rest-api.md, "Locate a quote"; docs/architecture.md, "Search"), each
with the key that orders the places it holds (:func:`keys`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telha.domain.search_query import MAX_INDEXED_SCOPE, fts5_trigrams, like_pattern, scope_rowids
from telha.storage.core.acl import admitted
from telha.storage.core.tx import Tx

__all__ = ["KEY_COLS", "NOT_STALE", "Filters", "candidate_keys", "containing", "keys"]


@dataclass(frozen=True, slots=True)
class Filters:
    """What a search is narrowed to (``None``: anything): a source, a source format, a
    label of a linked node, the sources whose ACL admits one of ``principals``
    (:func:`~telha.storage.core.acl.admitted`)."""

    source_id: bytes | None = None
    format: str | None = None
    label: str | None = None
    principals: tuple[str, ...] | None = None


#: Leaves out the index rows of a version no longer current whose deletion is still waiting.
NOT_STALE = (
    "NOT EXISTS (SELECT 1 FROM search_stale x WHERE x.scope_id = s.scope_id"
    " AND x.source_id = s.source_id AND x.version_tx = s.version_tx)"
)


async def containing(
    tx: Tx, sid: int, fragment: str, filters: Filters, limit: int
) -> list[tuple[bytes, int, int, int]]:
    """The scope's index rows of current versions whose indexed words contain ``fragment``
    (a folded word) anywhere, at most ``limit`` (the first found), each as
    ``(source_id, version_tx, start, rowid)`` (:func:`keys`): a superset the canonical text
    decides (docs/rest-api.md, "Locate a quote").

    Found by the substring index: on SQLite ``search_tri`` (FTS5 ``trigram``) asked for every
    row holding all of the fragment's trigrams (:func:`fts5_trigrams`), in index order (the
    newest first: :func:`~telha.domain.search_query.scope_rowids`), less
    the rows whose body (lower-cased) does not hold the fragment itself; on
    PostgreSQL the ``pg_trgm`` GIN index over ``words`` asked for ``LIKE '%fragment%'`` (the
    first ``limit`` rows found, in no set order). A fragment under 3 characters has no
    trigram: SQLite scans the scope's rows (the body compared lower-cased) in index order and
    stops at ``limit``; PostgreSQL's ``LIKE`` reads every row of the scope the same way."""
    if not tx.postgres and sid > MAX_INDEXED_SCOPE:
        return []
    stale = await tx.fetchone("SELECT 1 FROM search_stale WHERE scope_id = ? LIMIT 1", sid)
    conds: list[str] = [NOT_STALE] if stale is not None else []
    params: list[Any] = []
    if filters.source_id is not None:
        conds.append("s.source_id = ?")
        params.append(filters.source_id)
    if filters.principals is not None:
        seen, seen_params = admitted("s", filters.principals, postgres=tx.postgres)
        conds.append(seen)
        params += seen_params
    extra = "".join(f" AND {c}" for c in conds)
    if tx.postgres:
        rows = await tx.fetchall(
            f"SELECT {KEY_COLS} FROM search_spans s WHERE s.scope_id = ? AND s.words LIKE ?{extra}"
            " LIMIT ?",
            sid, like_pattern(fragment), *params, limit,
        )  # fmt: skip
        return keys(rows)
    lo, hi = scope_rowids(sid)
    trigrams = fts5_trigrams(fragment)
    if trigrams is not None:
        # The trigrams found apart (no positions kept) are ruled out here, in the engine, so
        # they never crowd the rows that hold the fragment out of the first ``limit``.
        sql = (
            f"SELECT {KEY_COLS} FROM search_tri f JOIN search_spans s ON s.rowid = f.rowid"
            " WHERE search_tri MATCH ? AND f.rowid >= ? AND f.rowid < ?"
            f" AND instr(lower(s.body), ?) > 0{extra} ORDER BY f.rowid LIMIT ?"
        )
        rows = await tx.fetchall(sql, trigrams, lo, hi, fragment, *params, limit)
    else:
        rows = await tx.fetchall(
            f"SELECT {KEY_COLS} FROM search_spans s WHERE s.rowid >= ? AND s.rowid < ?"
            f" AND instr(lower(s.body), ?) > 0{extra} ORDER BY s.rowid LIMIT ?",
            lo, hi, fragment, *params, limit,
        )  # fmt: skip
    return keys(rows)


#: What :func:`keys` reads of a candidate index row ``s``.
KEY_COLS = 's.source_id, s.version_tx, s.start, s.rowid, s."end"'


def keys(rows: list[tuple[Any, ...]]) -> list[tuple[bytes, int, int, int]]:
    """Candidate rows (:data:`KEY_COLS`) as ``(source_id, version_tx, start, rowid)``, in
    the order of the places they hold (by source, version and offset, then end: the same on
    both engines whatever their rowids), a row's places starting at its ``start`` or after."""
    ordered = sorted((bytes(r[0]), int(r[1]), int(r[2]), int(r[4]), int(r[3])) for r in rows)
    return [(src, at, start, rowid) for src, at, start, _, rowid in ordered]


async def candidate_keys(tx: Tx, sid: int, rowids: list[int]) -> list[tuple[bytes, int, int, int]]:
    """:func:`keys` of the scope's index rows ``rowids``."""
    if not rowids:
        return []
    cond, params = tx.any("s.rowid", rowids, "bigint")
    rows = await tx.fetchall(
        f"SELECT {KEY_COLS} FROM search_spans s WHERE {cond} AND +s.scope_id = ?", *params, sid
    )
    return keys(rows)
