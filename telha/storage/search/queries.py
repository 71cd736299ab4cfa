"""Search and quote location over the full-text index, written once for both engines
(docs/rest-api.md and "Locate a quote"; the index: :mod:`.search_index`).

Both read in one snapshot: the engine finds and ranks candidate span rows of the caller's
scope (SQLite: FTS5's ``bm25``; PostgreSQL: ``ts_rank`` over the GIN-indexed ``tsvector``),
then each candidate's canonical text is read and the byte ranges are computed in Python from
those bytes (:func:`telha.domain.search_query.match_places`,
:func:`~telha.domain.search_query.find_quote`), never taken from the engine.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import msgspec

from telha.domain.erasure import node_ids
from telha.domain.model import BLOB_CHUNK, Scope
from telha.domain.search_query import (
    Quote,
    Term,
    find_quote,
    match_places,
    quote_fragment,
    quote_terms,
)
from telha.domain.search_text import is_verbatim, snippet
from telha.storage.core.tx import Tx
from telha.storage.core.visible import visible
from telha.storage.reads.acl import admitted
from telha.storage.search.candidates import (
    NOT_STALE,
    Filters,
    candidate_keys,
    containing,
)
from telha.storage.search.index import index_pending, waiting

__all__ = [
    "CATCH_UP_S",
    "INDEX_BATCH",
    "Filters",
    "Located",
    "SearchHit",
    "locate",
    "search",
]

#: Candidate span rows a locate verifies at most.
LOCATE_CANDIDATES = 2000
#: Candidate span rows a locate reads at a time (it stops once its answer is known).
VERIFY_BATCH = 64
#: Span rows one indexing transaction writes at most (about 40 ms of FTS5 work).
INDEX_BATCH = 2000
#: Seconds a search or locate spends at most indexing its scope's queue first.
CATCH_UP_S = 2.0

_decode = msgspec.json.decode


@dataclass(slots=True)
class SearchHit:
    """One span row of a current version that matches: its range ``[start, end)`` (bytes),
    the matched words' byte ranges in the same text, a snippet, and ``page``/``bbox`` of the
    first linked node that has them."""

    source_id: bytes
    name: str
    version_tx: int
    start: int
    end: int
    kind: str
    node_ids: list[bytes]
    labels: list[str]
    snippet: str = ""
    matches: list[tuple[int, int]] = field(default_factory=list)
    page: int | None = None
    bbox: list[float] | None = None


@dataclass(frozen=True, slots=True)
class Located:
    """One occurrence of a quote: ``[start, end)`` bytes of the version's text, the nodes
    the span rows holding it link, ``exact`` when the bytes equal the quote (else they equal
    it after folding: :func:`telha.domain.search_query.find_quote`)."""

    source_id: bytes
    version_tx: int
    start: int
    end: int
    node_ids: list[bytes]
    exact: bool


def _conditions(tx: Tx, filters: Filters, stale: bool) -> tuple[list[str], list[Any]]:
    """The conditions on an index row ``s`` of the scope a search is narrowed to, and their
    parameters (bound between the dialect's
    :meth:`~telha.storage.core.dialect.Dialect.search_match` parameters); ``stale``: the
    scope has stale rows still to delete, which the conditions leave out."""
    conds: list[str] = [NOT_STALE] if stale else []
    params: list[Any] = []
    if filters.source_id is not None:
        conds.append("s.source_id = ?")
        params.append(filters.source_id)
    if filters.format is not None:
        conds.append("s.format = ?")
        params.append(filters.format)
    if filters.label is not None:
        conds.append(tx.dialect.contains("s.labels"))
        params.append(f" {filters.label} ")
    if filters.principals is not None:
        seen, seen_params = admitted("s", filters.principals, tx.dialect)
        conds.append(seen)
        params += seen_params
    return conds, params


async def _candidates(
    tx: Tx,
    sid: int,
    terms: list[Term],
    filters: Filters,
    limit: int,
    offset: int,
    *,
    ranked: bool,
    window: int = 0,
) -> list[int]:
    """Rowids of the scope's index rows of current versions matching ``terms``, best first
    (``ranked``) or in index order (:meth:`~telha.storage.core.dialect.Dialect.search_sql`).

    ``window`` > 0 (``[search] rank_window``; docs/rest-api.md), where the dialect
    ranks a window (:meth:`~telha.storage.core.dialect.Dialect.ranked_window_sql`, SQLite):
    when more rows than ``max(window, offset + limit)`` match, only that many of the newest
    (the lowest rowids: the last indexed) are ranked. Ranking scores every row it ranks
    (FTS5's ``bm25`` reads each row's length), while finding the rows only walks the
    doclists: a word in most spans otherwise costs a score for every span of the scope."""
    if not tx.dialect.indexed_scope(sid):
        return []  # no index rows (Tx.write_search_rows)
    stale = await tx.fetchone("SELECT 1 FROM search_stale WHERE scope_id = ? LIMIT 1", sid)
    conds, params = _conditions(tx, filters, stale is not None)
    first, ends = tx.dialect.search_match(terms, sid)
    windowed = tx.dialect.ranked_window_sql(conds) if ranked and window > 0 else None
    if windowed is not None:
        rows = await tx.fetchall(
            windowed, *first, *params, *ends, max(window, offset + limit), 0, limit, offset
        )
    else:
        sql = tx.dialect.search_sql(conds, ranked=ranked)
        rows = await tx.fetchall(sql, *first, *params, *ends, limit, offset)
    return [int(r[0]) for r in rows]


async def _details(tx: Tx, sid: int, rowids: list[int]) -> list[tuple[Any, ...]]:
    """``(rowid, source_id, version_tx, start, end, kind, linked, labels, name, blob_id,
    text)`` of index rows, in ``rowids`` order, of the scope only; ``text`` is the span's
    text as the index row holds it (its ``text``, or on SQLite its ``body`` when that is the
    text unchanged), ``None`` for a row written without it."""
    if not rowids:
        return []
    cond, params = tx.dialect.any("s.rowid", rowids, "bigint")
    known = tx.dialect.span_text
    rows = await tx.fetchall(
        'SELECT s.rowid, s.source_id, s.version_tx, s.start, s."end", s.kind, s.linked_nodes,'
        f" s.labels, v.name, v.blob_id, {known}, s.text IS NOT NULL"
        " FROM search_spans s JOIN source_versions v"
        " ON v.scope_id = s.scope_id AND v.source_id = s.source_id AND v.tx = s.version_tx"
        f" WHERE {cond} AND +s.scope_id = ?",  # by rowid: `+` keeps the scope's index out
        *params, sid,
    )  # fmt: skip
    order = {r: i for i, r in enumerate(rowids)}
    rows = [
        (
            *r[:10],
            r[10] if r[11] or (r[10] is not None and is_verbatim(r[10], r[4] - r[3])) else None,
        )
        for r in rows
    ]
    return sorted(rows, key=lambda r: order[int(r[0])])


class _Texts:
    """Span texts read from canonical text chunks (1 MiB): only the span's bytes of each
    chunk are sent back (``substr`` in the engine), so a hit costs its own length."""

    def __init__(self, tx: Tx, sid: int) -> None:
        self._tx, self._sid = tx, sid

    async def span(self, blob_id: bytes | None, start: int, end: int, known: str | None) -> str:
        """The text ``[start, end)`` of the blob (empty when the blob is gone); ``known``
        when the index row holds it already."""
        if known is not None:
            return known
        if blob_id is None or end <= start:
            return ""
        parts = []
        for idx in range(start // BLOB_CHUNK, (end - 1) // BLOB_CHUNK + 1):
            base = idx * BLOB_CHUNK
            lo, hi = max(start, base) - base, min(end, base + BLOB_CHUNK) - base
            row = await self._tx.fetchone(
                "SELECT substr(data, ?, ?) FROM blob_chunks WHERE scope_id = ? AND blob_id = ?"
                " AND idx = ?",
                lo + 1, hi - lo, self._sid, blob_id, idx,
            )  # fmt: skip
            parts.append(bytes(row[0]) if row is not None else b"")
        return b"".join(parts).decode("utf-8", "replace")


async def _geometry(tx: Tx, sid: int, ids: set[bytes]) -> dict[bytes, dict[str, Any]]:
    """``{node_id: properties}`` of the current versions of ``ids`` that carry a ``page``."""
    if not ids:
        return {}
    seen, seen_params = visible("n", None)
    cond, params = tx.dialect.any("n.node_id", sorted(ids), "bytea")
    rows = await tx.fetchall(
        f"SELECT n.node_id, n.properties FROM nodes n WHERE n.scope_id = ? AND {cond}"
        f" AND {seen}",
        sid, *params, *seen_params,
    )  # fmt: skip
    out = {}
    for node_id, props in rows:
        decoded = _decode(bytes(props))
        if isinstance(decoded, dict) and "page" in decoded:
            out[bytes(node_id)] = decoded
    return out


async def search(
    tx: Tx,
    scope: Scope,
    terms: list[Term],
    filters: Filters,
    limit: int,
    offset: int,
    rank_window: int = 0,
) -> list[SearchHit]:
    """The scope's current spans matching every term, best first, ``limit`` from
    ``offset``: each with its matched words' byte ranges, a snippet and its nodes'
    labels, page and bbox. ``rank_window`` > 0: on SQLite, a query matching more rows ranks
    only the newest ``max(rank_window, offset + limit)`` (see :func:`_candidates`); 0 ranks
    all."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    rowids = await _candidates(
        tx, sid, terms, filters, limit, offset, ranked=True, window=rank_window
    )
    texts = _Texts(tx, sid)
    hits: list[SearchHit] = []
    for _, source_id, at, start, end, kind, linked, labels, name, blob_id, known in await _details(
        tx, sid, rowids
    ):
        text = await texts.span(blob_id, start, end, known)
        places = match_places(text, terms)
        hits.append(
            SearchHit(
                bytes(source_id), str(name), int(at), int(start), int(end), str(kind),
                node_ids(bytes(linked)), str(labels).split(),
                snippet(text, places[0][2] if places else 0),
                [(start + a, start + b) for a, b, _ in places],
            )
        )  # fmt: skip
    geometry = await _geometry(tx, sid, {n for h in hits for n in h.node_ids})
    for hit in hits:
        for node in hit.node_ids:
            props = geometry.get(node)
            if props is not None:
                page = props.get("page")
                hit.page = page if isinstance(page, int) else None
                box = props.get("bbox")
                hit.bbox = [float(x) for x in box] if isinstance(box, list) else None
                break
    return hits


async def locate(
    tx: Tx,
    scope: Scope,
    quote: Quote,
    source_id: bytes | None,
    limit: int,
    principals: tuple[str, ...] | None = None,
) -> list[Located]:
    """Every place of the scope's current versions where ``quote`` occurs (at most
    ``limit``, by source, version and offset), overlapping and inside words included:
    candidates are the span rows that may hold it
    (:func:`~telha.domain.search_query.quote_terms`: the index; a one-word quote that may
    lie inside a word, :func:`~telha.domain.search_query.quote_fragment`: the substring
    index, :func:`~telha.storage.search.candidates.containing`), verified against their
    canonical text folded (:func:`~telha.domain.search_query.find_quote`) in the order of
    the places they hold (source, version, start), :data:`VERIFY_BATCH` read at a time,
    until the first ``limit`` places are known. Occurrences that nested span rows share
    are one, with the nodes of every such row. With ``principals``, of the sources whose
    ACL admits one of them only."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    filters = Filters(source_id=source_id, principals=principals)
    fragment = quote_fragment(quote)
    if fragment is not None:
        keys = await containing(tx, sid, fragment, filters, LOCATE_CANDIDATES)
    else:
        rowids = await _candidates(
            tx, sid, quote_terms(quote), filters, LOCATE_CANDIDATES, 0, ranked=False
        )
        keys = await candidate_keys(tx, sid, rowids)
    texts = _Texts(tx, sid)
    found: dict[tuple[bytes, int, int, int], tuple[list[bytes], bool]] = {}
    # The places found that start at or after the next candidate's start (a heap), and how
    # many start before it: those are final, no later candidate holds one or one before.
    later: list[tuple[bytes, int, int, int]] = []
    settled = 0
    rows: dict[int, tuple[Any, ...]] = {}
    for i, key in enumerate(keys):
        while later and later[0][:3] < key[:3]:
            heapq.heappop(later)
            settled += 1
        if settled >= limit:  # the first ``limit`` places are known
            break
        if i % VERIFY_BATCH == 0:
            batch = [k[3] for k in keys[i : i + VERIFY_BATCH]]
            rows = {int(r[0]): r for r in await _details(tx, sid, batch)}
        row = rows.get(key[3])
        if row is None:  # its version is gone since
            continue
        _, src, at, start, end, _, linked, _, _, blob_id, known = row
        text = await texts.span(blob_id, start, end, known)
        for lo, hi, exact in find_quote(text, quote):
            place = (bytes(src), int(at), start + lo, start + hi)
            if place not in found:
                heapq.heappush(later, place)
            nodes, _ = found.setdefault(place, ([], exact))
            nodes.extend(n for n in node_ids(bytes(linked)) if n not in nodes)
    return [
        Located(s, t, a, b, nodes, exact) for (s, t, a, b), (nodes, exact) in sorted(found.items())
    ][:limit]


async def settled_search(
    tx: Tx,
    scope: Scope,
    terms: list[Term],
    filters: Filters,
    limit: int,
    offset: int,
    rank_window: int,
) -> list[SearchHit] | None:
    """:func:`search` when no index work of ``scope`` waits, in the same snapshot; ``None``
    when some does (the caller catches up first)."""
    sid = await tx.known_scope_id(scope)
    if sid is not None and await waiting(tx, sid):
        return None
    return await search(tx, scope, terms, filters, limit, offset, rank_window)


async def index_step(tx: Tx, scope: Scope | None, limit: int) -> int:
    """One :func:`~telha.storage.search.index.index_pending` batch of ``scope``'s
    waiting index work (``None``: any scope's)."""
    if not tx.search:
        return 0
    sid = None if scope is None else await tx.known_scope_id(scope)
    if scope is not None and sid is None:
        return 0
    return await index_pending(tx, limit, sid)


async def queued(tx: Tx, scope: Scope | None) -> int:
    """Versions whose index rows wait to be written or deleted (of ``scope``, or of every
    scope)."""
    sid = None if scope is None else await tx.known_scope_id(scope)
    if scope is not None and sid is None:
        return 0
    return await waiting(tx, sid)
