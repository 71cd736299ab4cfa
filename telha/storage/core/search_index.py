"""The full-text index, kept once for both engines (docs/architecture.md, "Search").

``search_spans`` holds one row per span row of each source's **current** version — its
latest published version, neither retired nor erased — with the span's text as the engine
indexes it (:mod:`telha.domain.search_text`): SQLite's FTS5 (``search_fts``, external content
over ``search_spans``, kept here statement by statement) cuts and folds it, PostgreSQL stores
the words Telha cut and folded as a ``tsvector`` under a GIN index.

Two halves, so an ingest does not wait for the index:

- :func:`sync_source` is the one function every write that changes which version of a
  source is current calls, in its own transaction, right after it recorded the change
  (:func:`telha.storage.core.sources.note_versions`): a publish (which supersedes), a retire
  (an archive's new version retiring members too) and an erasure's ``mark``. It deletes the
  rows of every version that is not current — so a superseded, retired or erased version
  leaves the index in the transaction that closes it — and queues the current version in
  ``search_pending`` when its rows are not written yet.
- :func:`index_pending` writes a queued version's rows, a batch of span rows per
  transaction (only the canonical text's chunks those spans cover are read), from where the
  previous batch stopped. The search indexer actor (:mod:`telha.search_indexer`) runs it
  after commits; a search or locate first runs it for its own scope's queue, so it reads
  what its scope published before it.

:func:`purge_erased` then rewrites what could still hold an erased version's words
(SQLite: FTS5 keeps a deleted row's words in its index segments until they are merged).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.erasure import node_ids
from telha.domain.model import BLOB_CHUNK
from telha.domain.search_text import fts5_body, tsvector_literal, words
from telha.offload import off_loop
from telha.storage.core.tx import Tx

__all__ = [
    "SEARCH_COLS",
    "index_pending",
    "pending_count",
    "purge_erased",
    "set_search",
    "sync_source",
]

#: The columns of a ``search_spans`` row as the index writes them.
SEARCH_COLS = 'scope_id, source_id, version_tx, start, "end", kind, linked_nodes, labels, format'
_INSERT_SQLITE = f"INSERT INTO search_spans ({SEARCH_COLS}, body) VALUES ({'?, ' * 9}?)"
_INSERT_PG = f"INSERT INTO search_spans ({SEARCH_COLS}, body) VALUES ({'?, ' * 9}?::text::tsvector)"
#: Ids one ``IN (…)`` list names at most on SQLite.
_BATCH = 500

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
    step = max(len(wanted), 1) if tx.postgres else _BATCH
    for i in range(0, len(wanted), step):
        cond, params = tx.any("node_id", wanted[i : i + step], "bytea")
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
    postgres: bool,
) -> list[tuple[Any, ...]]:
    """The ``search_spans`` rows of a version's span rows ``(start, end, kind, linked)``
    (``text``: the canonical text's bytes from offset ``base``):
    SQLite's body is the span's text for FTS5 to cut (:func:`fts5_body`), PostgreSQL's the
    ``tsvector`` of its words (:func:`tsvector_literal`)."""
    out = []
    cached: dict[str, list[str]] = {}
    for start, end, kind, linked in spans:
        span = text[start - base : end - base].decode("utf-8", "replace")
        body = tsvector_literal([w for w, _, _ in words(span)]) if postgres else fts5_body(span)
        names: set[str] = set()
        for node in node_ids(bytes(linked)):
            raw = labels.get(node)
            if raw is not None:
                if raw not in cached:
                    cached[raw] = list(_decode(raw))
                names.update(cached[raw])
        tags = " " + " ".join(sorted(names)) + " " if names else " "
        out.append((sid, source_id, at, start, end, kind, bytes(linked), tags, fmt, body))
    return out


@dataclass(frozen=True, slots=True)
class _Pending:
    """A ``search_pending`` row: the version being indexed and the key of its last span
    row indexed."""

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


async def _index_batch(tx: Tx, pending: _Pending, blob_id: bytes, fmt: str, limit: int) -> int:
    """Index up to ``limit`` span rows of the pending version after its key, move the key
    (or end the entry when none is left); returns how many span rows it indexed."""
    sid, source_id, at = pending.sid, pending.source_id, pending.version_tx
    spans = await tx.fetchall(
        'SELECT start, "end", kind, linked_nodes FROM span_rows WHERE scope_id = ?'
        ' AND source_id = ? AND source_version_tx = ? AND (start, "end") > (?, ?)'
        ' ORDER BY start, "end" LIMIT ?',
        sid, source_id, at, pending.last_start, pending.last_end, limit,
    )  # fmt: skip
    if spans:
        base, text = await _text(tx, sid, blob_id, int(spans[0][0]), max(int(s[1]) for s in spans))
        ids = {n for *_, linked in spans for n in node_ids(bytes(linked))}
        labels = await _labels(tx, sid, source_id, at, ids)
        args = (sid, source_id, at, fmt, base, text, spans, labels, tx.postgres)
        if tx.postgres:  # an operation runs on the event loop there: large texts go to a thread
            await tx.executemany(_INSERT_PG, await off_loop(len(text), _rows, *args))
        else:  # SQLite runs the operation on its writer's thread already
            await tx.executemany(_INSERT_SQLITE, _rows(*args))
            await tx.execute(
                "INSERT INTO search_fts (rowid, scope_id, body) SELECT rowid, scope_id, body"
                " FROM search_spans WHERE scope_id = ? AND source_id = ? AND version_tx = ?"
                ' AND (start, "end") > (?, ?)',
                sid, source_id, at, pending.last_start, pending.last_end,
            )  # fmt: skip
    if len(spans) < limit:
        await tx.execute(
            "DELETE FROM search_pending WHERE scope_id = ? AND source_id = ?", sid, source_id
        )
    else:
        await tx.execute(
            "UPDATE search_pending SET last_start = ?, last_end = ?"
            " WHERE scope_id = ? AND source_id = ?",
            int(spans[-1][0]), int(spans[-1][1]), sid, source_id,
        )  # fmt: skip
    return len(spans)


async def _delete_version(tx: Tx, sid: int, source_id: bytes, at: int) -> None:
    """Delete the index rows of the source's version written at ``at``."""
    if not tx.postgres:  # the words leave FTS5 first: its 'delete' needs the stored body
        await tx.execute(
            "INSERT INTO search_fts (search_fts, rowid, scope_id, body) SELECT 'delete',"
            " rowid, scope_id, body FROM search_spans WHERE scope_id = ? AND source_id = ?"
            " AND version_tx = ?",
            sid, source_id, at,
        )  # fmt: skip
    await tx.execute(
        "DELETE FROM search_spans WHERE scope_id = ? AND source_id = ? AND version_tx = ?",
        sid, source_id, at,
    )  # fmt: skip


async def sync_source(tx: Tx, sid: int, source_id: bytes) -> None:
    """Make the index hold no span row but the source's current version's, and queue that
    version (``search_pending``) if its rows are not written yet: rows of any other version
    are deleted now, the current one's are written after the commit by
    :func:`index_pending`. A no-op when the store runs with ``[search] enabled = false``
    (:attr:`Tx.search`)."""
    if not tx.search:
        return
    current = await _current(tx, sid, source_id)
    rows = await tx.fetchall(
        "SELECT DISTINCT version_tx FROM search_spans WHERE scope_id = ? AND source_id = ?",
        sid, source_id,
    )  # fmt: skip
    have = {int(r[0]) for r in rows}
    want = current[0] if current is not None else None
    stale = sorted(have - {want})
    for old in stale:
        await _delete_version(tx, sid, source_id, old)
    queued = await tx.fetchone(
        "SELECT version_tx FROM search_pending WHERE scope_id = ? AND source_id = ?",
        sid, source_id,
    )  # fmt: skip
    if want is None or (want in have and queued is None):  # nothing to index, or all of it is
        if queued is not None:
            await tx.execute(
                "DELETE FROM search_pending WHERE scope_id = ? AND source_id = ?", sid, source_id
            )
        return
    if queued is not None and int(queued[0]) == want:  # being indexed
        return
    if want in have:  # rows of an entry that did not finish: start the version again
        await _delete_version(tx, sid, source_id, want)
    await tx.execute(
        "INSERT INTO search_pending (scope_id, source_id, version_tx, last_start, last_end)"
        " VALUES (?, ?, ?, -1, -1) ON CONFLICT (scope_id, source_id) DO UPDATE SET"
        " version_tx = excluded.version_tx, last_start = -1, last_end = -1",
        sid, source_id, want,
    )  # fmt: skip


async def index_pending(tx: Tx, limit: int, sid: int | None) -> int:
    """Index up to ``limit`` span rows of the oldest queued version (of scope ``sid``, or
    of any scope when ``None``) and return how many it indexed; 0 when nothing is queued.
    A queued version no longer current is settled by :func:`sync_source` instead. On
    PostgreSQL a queue entry another replica holds is skipped."""
    where, params = ("WHERE scope_id = ? ", [sid]) if sid is not None else ("", [])
    row = await tx.fetchone(
        "SELECT scope_id, source_id, version_tx, last_start, last_end FROM search_pending"
        f" {where}ORDER BY version_tx LIMIT 1{tx.skip_locked}",
        *params,
    )  # fmt: skip
    if row is None:
        return 0
    pending = _Pending(int(row[0]), bytes(row[1]), int(row[2]), int(row[3]), int(row[4]))
    current = await _current(tx, pending.sid, pending.source_id)
    if current is None or current[0] != pending.version_tx or current[1] is None:
        await sync_source(tx, pending.sid, pending.source_id)
        if current is not None and current[1] is None:  # a version without text: nothing to index
            await tx.execute(
                "DELETE FROM search_pending WHERE scope_id = ? AND source_id = ?",
                pending.sid, pending.source_id,
            )  # fmt: skip
        return 1
    return max(await _index_batch(tx, pending, current[1], current[2], limit), 1)


async def pending_count(tx: Tx, sid: int | None) -> int:
    """Versions queued for the index (of scope ``sid``, or of every scope)."""
    where, params = (" WHERE scope_id = ?", [sid]) if sid is not None else ("", [])
    row = await tx.fetchone(f"SELECT count(*) FROM search_pending{where}", *params)
    return int(row[0]) if row else 0


async def purge_erased(tx: Tx) -> None:
    """After an erasure removed its versions' rows: rewrite what may still hold their words.
    SQLite's FTS5 (3.40, without ``secure-delete``) keeps a deleted row's words in its index
    segments until they are merged: ``optimize`` merges every segment into one, so the
    erased words are gone (and ``secure_delete`` zeroes the freed pages). PostgreSQL's dead
    row versions go at ``VACUUM FULL`` (docs/operations.md, "Erasure")."""
    if not tx.postgres:
        await tx.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")


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
    if not tx.postgres:
        await tx.execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
    await tx.execute("DELETE FROM search_spans")
    await tx.execute("DELETE FROM search_pending")
    await purge_erased(tx)
    if tx.search:
        for sid, source_id in await tx.fetchall(
            "SELECT scope_id, source_id FROM sources ORDER BY scope_id, source_id"
        ):
            await sync_source(tx, int(sid), bytes(source_id))
    await tx.execute("UPDATE search_state SET enabled = ? WHERE id = 1", int(tx.search))
    return tx.search
