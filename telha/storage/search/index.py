"""The full-text index, kept once for both engines (docs/architecture.md, "Search").

``search_spans`` holds one row per span row of each source's **current** version — its
latest published version, neither retired nor erased — with the span's text as the engine
indexes it (:mod:`telha.domain.search_text`; the row's engine-specific columns come from the
dialect, :meth:`~telha.storage.core.dialect.Dialect.search_columns`): SQLite's FTS5
(``search_fts``, external content over ``search_spans``, kept statement by statement in the
same transactions: :meth:`~telha.storage.core.tx.Tx.write_search_rows` writes, the deletes
here name the dialect's ``fts_tables``) cuts and folds it, PostgreSQL stores
the words Telha cut and folded as a ``tsvector`` under a GIN index. Beside it, the substring
index a locate of a fragment reads: SQLite's ``search_tri`` (FTS5 ``trigram`` over the same
body, kept in the same statements), PostgreSQL's ``pg_trgm`` GIN index over ``words`` (the
span's distinct folded words) — every path that writes or deletes rows keeps both.

Kept in two halves, so no ingest waits for the index:

- :func:`sync_source` is the one function every write that changes which version of a
  source is current calls, in its own transaction, right after it recorded the change
  (:func:`telha.storage.core.sources.note_versions`): a publish (which supersedes), a retire
  (an archive's new version retiring members too) and an erasure's ``mark``. It only
  records the work: the version the index held for the source becomes stale
  (``search_stale``) and its current version is to be filled (``search_sources``). An
  erasure then deletes the stale rows of its sources at once (:func:`drop_stale`).
- :func:`index_pending` does the work a batch per transaction: deletes a stale version's
  rows, then writes the oldest version being filled from the key the previous batch stored
  (only the canonical chunks those span rows cover are read). The search indexer actor
  (:mod:`telha.search.indexer`) runs it after commits; a search or locate first runs it
  for its own scope (:meth:`telha.storage.search.aggregate.Search.catch_up`) and, should
  stale rows remain after that, leaves them out of its answer: no search answers a
  version that is not current.

:func:`purge_erased` then rewrites what could still hold an erased version's words
(SQLite: FTS5 keeps a deleted row's words in its index segments until they are merged).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from telha.domain.erasure import node_ids
from telha.domain.model import BLOB_CHUNK
from telha.storage.core.dialect import Dialect
from telha.storage.core.row_faults import per_row
from telha.storage.core.tx import Tx, any_groups

__all__ = [
    "BATCH_S",
    "ENTRIES_PER_BATCH",
    "drop_stale",
    "index_pending",
    "purge_erased",
    "set_search",
    "sync_source",
    "waiting",
]

log = structlog.get_logger("telha.search_index")

#: Waiting entries one :func:`index_pending` transaction settles at most.
ENTRIES_PER_BATCH = 64
#: Seconds one :func:`index_pending` transaction goes on taking entries (it commits after
#: the entry that passes them). A batch holds the one writer, and on SQLite its Python work
#: (cutting and folding the spans' words) holds the interpreter lock the event loop's
#: thread needs: 64 small versions in one batch held every enqueue, lease and commit for
#: 100–190 ms (docs/architecture.md, "Search").
BATCH_S = 0.002

_decode = msgspec.json.decode


async def _current(tx: Tx, sid: int, source_id: bytes) -> tuple[int, bytes | None, str] | None:
    """``(tx, blob_id, format)`` of the source's current version, or ``None`` (no published
    version, or the latest one retired or erased)."""
    row = await tx.fetchone(
        "SELECT tx, blob_id, format, retired_tx, erased_at FROM source_versions"
        " WHERE scope_id = ? AND source_id = ? AND published_tx IS NOT NULL"
        " ORDER BY tx DESC LIMIT 1",
        sid, source_id,
    )  # fmt: skip
    if row is None or row[3] is not None or row[4] is not None:
        return None
    return int(row[0]), row[1], str(row[2])


async def _labels(tx: Tx, sid: int, source_id: bytes, at: int, ids: set[bytes]) -> dict[bytes, str]:
    """Labels (a JSON array) of the nodes ``ids`` as the version at ``at`` linked them: its
    own node rows, else (a node another source wrote unchanged) the node's open row."""
    found: dict[bytes, str] = {}
    wanted = sorted(ids)
    for cond, params in any_groups(tx, "node_id", wanted, "bytea"):
        for n, labels, src, t_from, t_to in await tx.fetchall(
            f"SELECT node_id, labels, source_id, tx_from, tx_to FROM nodes WHERE scope_id = ?"
            f" AND {cond} AND (tx_to IS NULL OR tx_from = ?)",
            sid, *params, at,
        ):  # fmt: skip
            own = int(t_from) == at and src is not None and bytes(src) == source_id
            if own or (t_to is None and bytes(n) not in found):
                found[bytes(n)] = str(labels)
    return found


def _rows(
    sid: int,
    source_id: bytes,
    at: int,
    fmt: str,
    base: int,
    text: bytes,
    spans: Sequence[tuple[Any, ...]],
    labels: dict[bytes, str],
    dialect: Dialect,
) -> list[tuple[Any, ...]]:
    """The ``search_spans`` rows of a version's span rows ``(start, end, kind, linked)``
    (``text``: the canonical text's bytes from offset ``base``):
    :data:`~telha.storage.core.row_tables.SEARCH_COLS`, then
    the dialect's :meth:`~telha.storage.core.dialect.Dialect.search_columns` of the span's
    text."""
    out = []
    cached: dict[str, list[str]] = {}
    for start, end, kind, linked in spans:
        span = text[start - base : end - base].decode("utf-8", "replace")
        names: set[str] = set()
        for node in node_ids(bytes(linked)):
            raw = labels.get(node)
            if raw is not None:
                if raw not in cached:
                    cached[raw] = list(_decode(raw))
                names.update(cached[raw])
        tags = " " + " ".join(sorted(names)) + " " if names else " "
        row = (sid, source_id, at, start, end, kind, bytes(linked), tags, fmt)
        out.append((*row, *dialect.search_columns(span, end - start)))
    return out


@dataclass(slots=True)
class _Batch:
    """What one :func:`index_pending` transaction learnt that its later entries need not
    read again (bench/RESULTS.md, "Fewer statements per job"): that no stale version waits
    (until an entry of its own makes one stale). (SQLite's transaction remembers the lowest
    rowid it gave each scope's rows: :meth:`~telha.storage.core.tx.Tx.write_search_rows`.)"""

    no_stale: bool = False


@dataclass(frozen=True, slots=True)
class _Filling:
    """A ``search_sources`` row not done: the version being written and the key of its
    last span row written."""

    sid: int
    source_id: bytes
    version_tx: int
    last_start: int
    last_end: int


async def _text(tx: Tx, sid: int, blob_id: bytes, start: int, end: int) -> tuple[int, bytes]:
    """``(base, bytes)``: the canonical text's chunks covering ``[start, end)`` (bytes) and
    the offset of their first byte."""
    first, last = start // BLOB_CHUNK, max(end - 1, start) // BLOB_CHUNK
    chunks = await tx.fetchall(
        "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ?"
        " AND idx >= ? AND idx <= ? ORDER BY idx",
        sid, blob_id, first, last,
    )  # fmt: skip
    return first * BLOB_CHUNK, b"".join(bytes(c[0]) for c in chunks)


async def _fill(tx: Tx, job: _Filling, blob_id: bytes, fmt: str, limit: int) -> int:
    """Write the index rows of up to ``limit`` span rows of the version being filled, after
    its key; move the key, or mark the source done when none is left. Returns the span rows
    written."""
    sid, source_id, at = job.sid, job.source_id, job.version_tx
    spans = await tx.fetchall(
        'SELECT start, "end", kind, linked_nodes FROM span_rows WHERE scope_id = ?'
        ' AND source_id = ? AND source_version_tx = ? AND (start, "end") > (?, ?)'
        ' ORDER BY start, "end" LIMIT ?',
        sid, source_id, at, job.last_start, job.last_end, limit,
    )  # fmt: skip
    if spans:
        end = max(int(s[1]) for s in spans)
        base, text = await _text(tx, sid, blob_id, int(spans[0][0]), end)
        _check_range(spans, base + len(text))
        ids = {n for *_, linked in spans for n in node_ids(bytes(linked))}
        labels = await _labels(tx, sid, source_id, at, ids)
        rows = await tx.compute(
            len(text), _rows, sid, source_id, at, fmt, base, text, spans, labels, tx.dialect
        )
        await tx.write_search_rows(sid, rows)
    done = len(spans) < limit
    last = (int(spans[-1][0]), int(spans[-1][1])) if spans else (job.last_start, job.last_end)
    await tx.execute(
        f"UPDATE search_sources SET last_start = ?, last_end = ?, done = {_bool(done)}"
        " WHERE scope_id = ? AND source_id = ?",
        *last, sid, source_id,
    )  # fmt: skip
    return len(spans)


def _check_range(spans: Sequence[tuple[Any, ...]], stored: int) -> None:
    """Every span row ``(start, end, …)`` lies in the canonical text stored up to byte
    ``stored`` (a version's text is whole while it is current).

    :raises ValueError: a span row is reversed, negative or past the stored text (its text
        is missing or short): the entry cannot be indexed.
    """
    for start, end, *_ in spans:
        if not 0 <= start <= end:
            raise ValueError(f"span row [{start}, {end}) is not a byte range")
        if end > stored:
            raise ValueError(
                f"span row [{start}, {end}) is past the canonical text stored"
                f" ({stored} bytes): the text is missing or short"
            )


def _bool(value: bool) -> str:
    """A boolean literal both engines read (SQLite stores it as 1 or 0)."""
    return "true" if value else "false"


async def _delete_rows(tx: Tx, sid: int, source_id: bytes, at: int, limit: int | None) -> int:
    """Delete the index rows of the source's version written at ``at`` (at most ``limit``,
    ``None``: all); returns how many."""
    cut = f" LIMIT {int(limit)}" if limit is not None else ""
    rows = await tx.fetchall(
        "SELECT rowid FROM search_spans WHERE scope_id = ? AND source_id = ?"
        f" AND version_tx = ?{cut}",
        sid, source_id, at,
    )  # fmt: skip
    ids = [int(r[0]) for r in rows]
    for cond, params in any_groups(tx, "rowid", ids, "bigint"):
        # The words and trigrams leave FTS5 first: its 'delete' needs the stored body.
        for table in tx.dialect.fts_tables:
            await tx.execute(
                f"INSERT INTO {table} ({table}, rowid, body) SELECT 'delete', rowid, body"
                f" FROM search_spans WHERE {cond}",
                *params,
            )  # fmt: skip
        await tx.execute(f"DELETE FROM search_spans WHERE {cond}", *params)
    return len(ids)


async def sync_source(tx: Tx, sid: int, source_id: bytes, *, current: int | None = None) -> None:
    """Record what the index must do now that the source's current version may have
    changed: the version the index held or was filling becomes stale (``search_stale``:
    its rows are deleted later, and no search answers them meanwhile), and the current
    version, if any, is to be filled (``search_sources``, from the first span row). Reads
    and writes one row or two: no index row is touched here. A no-op when the store runs
    with ``[search] enabled = false`` (:attr:`Tx.search`). ``current``: the tx of the
    source's current version when the caller knows it (it has just published it); ``None``:
    read here (and maybe none)."""
    if not tx.search:
        return
    if current is not None:
        want: int | None = current
    else:
        found = await _current(tx, sid, source_id)
        want = found[0] if found is not None else None
    held = await tx.fetchone(
        "SELECT version_tx FROM search_sources WHERE scope_id = ? AND source_id = ?",
        sid, source_id,
    )  # fmt: skip
    if held is not None and int(held[0]) == want:
        return
    if held is not None:
        await tx.execute(
            "INSERT INTO search_stale (scope_id, source_id, version_tx) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            sid, source_id, int(held[0]),
        )  # fmt: skip
    if want is None:
        await tx.execute(
            "DELETE FROM search_sources WHERE scope_id = ? AND source_id = ?", sid, source_id
        )
        return
    await tx.execute(
        "INSERT INTO search_sources (scope_id, source_id, version_tx, last_start, last_end,"
        " done) VALUES (?, ?, ?, -1, -1, false) ON CONFLICT (scope_id, source_id) DO UPDATE"
        " SET version_tx = excluded.version_tx, last_start = -1, last_end = -1, done = false,"
        " failure = NULL",
        sid, source_id, want,
    )  # fmt: skip


async def drop_stale(tx: Tx, sid: int, source_id: bytes) -> None:
    """Delete now every stale version's rows of the source (an erasure's ``mark``: its
    words must leave the index in that transaction)."""
    if not tx.search:
        return
    for (at,) in await tx.fetchall(
        "SELECT version_tx FROM search_stale WHERE scope_id = ? AND source_id = ?",
        sid, source_id,
    ):  # fmt: skip
        await _delete_rows(tx, sid, source_id, int(at), None)
    await tx.execute(
        "DELETE FROM search_stale WHERE scope_id = ? AND source_id = ?", sid, source_id
    )


async def index_pending(tx: Tx, limit: int, sid: int | None) -> int:
    """One batch of the index's waiting work (of scope ``sid``, or of any scope when
    ``None``): stale versions' rows deleted, then the oldest versions being filled written,
    entry after entry until ``limit`` rows were deleted or written or
    :data:`ENTRIES_PER_BATCH` entries were settled or :data:`BATCH_S` passed (many small
    versions share one transaction, which stays short). Returns the rows deleted or written
    (at least 1 per entry settled), 0 when nothing waits. On PostgreSQL an entry another
    replica holds is skipped. Where the batches end changes no row written: each takes the
    scope's rowids on from the lowest the one before left."""
    done = 0
    batch = _Batch()
    ends = time.monotonic() + BATCH_S
    for _ in range(ENTRIES_PER_BATCH):
        step = await _one_entry(tx, limit - done, sid, batch)
        if step is None:
            break
        done += step
        if done >= limit or time.monotonic() >= ends:
            break
    return done


async def _one_entry(tx: Tx, limit: int, sid: int | None, batch: _Batch) -> int | None:
    """Work on one waiting entry with a budget of ``limit`` rows: a stale version's rows
    deleted, else the oldest version being filled written from its key. Returns the rows
    deleted or written (at least 1), ``None`` when nothing waits."""
    where, params = ("WHERE scope_id = ? ", [sid]) if sid is not None else ("", [])
    stale = None
    if not batch.no_stale:
        stale = await tx.fetchone(
            f"SELECT scope_id, source_id, version_tx FROM search_stale {where}"
            f"LIMIT 1{tx.skip_locked}",
            *params,
        )  # fmt: skip
        batch.no_stale = stale is None
    if stale is not None:
        key = (int(stale[0]), bytes(stale[1]), int(stale[2]))
        gone = await _delete_rows(tx, *key, limit)
        if gone < limit:
            await tx.execute(
                "DELETE FROM search_stale WHERE scope_id = ? AND source_id = ?"
                " AND version_tx = ?",
                *key,
            )  # fmt: skip
        return max(gone, 1)
    where = "AND scope_id = ? " if sid is not None else ""
    row = await tx.fetchone(
        "SELECT scope_id, source_id, version_tx, last_start, last_end FROM search_sources"
        f" WHERE NOT done {where}ORDER BY version_tx LIMIT 1{tx.skip_locked}",
        *params,
    )  # fmt: skip
    if row is None:
        return None
    job = _Filling(int(row[0]), bytes(row[1]), int(row[2]), int(row[3]), int(row[4]))
    with per_row(tx, "search_entry", (job.sid, job.source_id, job.version_tx)):
        current = await _current(tx, job.sid, job.source_id)
        if current is None or current[0] != job.version_tx:  # not current any more
            await sync_source(tx, job.sid, job.source_id)
            batch.no_stale = False  # it may have made the entry's version stale
            return 1
        if current[1] is None:  # a version without text: nothing to write
            await tx.execute(
                "UPDATE search_sources SET done = true WHERE scope_id = ? AND source_id = ?",
                job.sid, job.source_id,
            )  # fmt: skip
            return 1
        return max(await _fill(tx, job, current[1], current[2], limit), 1)


async def waiting(tx: Tx, sid: int | None) -> int:
    """Entries of the index's waiting work (stale versions and versions being filled) of
    scope ``sid``, or of every scope."""
    cond, params = ("scope_id = ?", [sid]) if sid is not None else ("true", [])
    filling = await tx.fetchone(
        f"SELECT count(*) FROM search_sources WHERE NOT done AND {cond}", *params
    )
    stale = await tx.fetchone(f"SELECT count(*) FROM search_stale WHERE {cond}", *params)
    return int(filling[0] if filling else 0) + int(stale[0] if stale else 0)


async def purge_erased(tx: Tx) -> None:
    """After an erasure removed its versions' rows: rewrite what may still hold their words.
    SQLite's FTS5 (3.40, without ``secure-delete``) keeps a deleted row's words in its index
    segments until they are merged: ``optimize`` merges every segment into one, so the
    erased words are gone (and ``secure_delete`` zeroes the freed pages) — of the word index
    and of the substring index (``search_tri``) alike. PostgreSQL's dead row versions and
    their GIN entries go at ``VACUUM FULL`` (docs/operations.md, "Erasure")."""
    for table in tx.dialect.fts_tables:
        await tx.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


async def set_search(tx: Tx) -> bool:
    """Bring the index in line with :attr:`Tx.search` at a store's start: enabled on an
    index not built (a database from before search, or one run with search disabled) queues
    every source's current version (:func:`index_pending` writes them after the start);
    disabled empties the index and its queue (a later start with search enabled builds it
    again). Returns whether it queued the index's build."""
    row = await tx.fetchone(f"SELECT enabled FROM search_state WHERE id = 1{tx.for_update}")
    built = row is not None and bool(row[0])
    if built == tx.search:
        return False
    for table in tx.dialect.fts_tables:
        await tx.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")
    await tx.execute("DELETE FROM search_spans")
    await tx.execute("DELETE FROM search_sources")
    await tx.execute("DELETE FROM search_stale")
    await purge_erased(tx)
    if tx.search:
        sources = await tx.fetchall(
            "SELECT scope_id, source_id FROM sources ORDER BY scope_id, source_id"
        )
        for sid, source_id in sources:
            await sync_source(tx, int(sid), bytes(source_id))
        if sources:  # the search indexer logs the build's progress (telha.search.indexer)
            log.info("search_index_build_queued", sources=len(sources))
    await tx.execute("UPDATE search_state SET enabled = ? WHERE id = 1", int(tx.search))
    return tx.search
