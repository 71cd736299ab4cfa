"""What a search or locate is narrowed to, and a locate's candidate span rows found by the
substring index (docs/rest-api.md, "Locate a quote"; docs/architecture.md, "Search"), each
with the key that orders the places it holds (:func:`keys`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telha.storage.core.tx import Tx
from telha.storage.reads.acl import admitted

__all__ = ["KEY_COLS", "NOT_STALE", "Filters", "candidate_keys", "containing", "keys"]


@dataclass(frozen=True, slots=True)
class Filters:
    """What a search is narrowed to (``None``: anything): a source, a source format, a
    label of a linked node, the sources whose ACL admits one of ``principals``
    (:func:`~telha.storage.reads.acl.admitted`)."""

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

    Found by the substring index (the dialect's
    :meth:`~telha.storage.core.dialect.Dialect.fragment_sql`): on SQLite ``search_tri``
    (FTS5 ``trigram``) asked for every row holding all of the fragment's trigrams, in index
    order (the newest first: :func:`~telha.domain.search_query.scope_rowids`), less
    the rows whose body (lower-cased) does not hold the fragment itself; on
    PostgreSQL the ``pg_trgm`` GIN index over ``words`` asked for ``LIKE '%fragment%'`` (the
    first ``limit`` rows found, in no set order). A fragment under 3 characters has no
    trigram: SQLite scans the scope's rows (the body compared lower-cased) in index order and
    stops at ``limit``; PostgreSQL's ``LIKE`` reads every row of the scope the same way."""
    if not tx.dialect.indexed_scope(sid):
        return []
    stale = await tx.fetchone("SELECT 1 FROM search_stale WHERE scope_id = ? LIMIT 1", sid)
    conds: list[str] = [NOT_STALE] if stale is not None else []
    params: list[Any] = []
    if filters.source_id is not None:
        conds.append("s.source_id = ?")
        params.append(filters.source_id)
    if filters.principals is not None:
        seen, seen_params = admitted("s", filters.principals, tx.dialect)
        conds.append(seen)
        params += seen_params
    sql, first = tx.dialect.fragment_sql(fragment, sid, KEY_COLS, conds)
    return keys(await tx.fetchall(sql, *first, *params, limit))


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
    cond, params = tx.dialect.any("s.rowid", rowids, "bigint")
    rows = await tx.fetchall(
        f"SELECT {KEY_COLS} FROM search_spans s WHERE {cond} AND +s.scope_id = ?", *params, sid
    )
    return keys(rows)
