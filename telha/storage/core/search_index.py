"""The full-text index, kept once for both engines (docs/architecture.md, "Search").

``search_spans`` holds one row per span row of each source's **current** version — its
latest published version, neither retired nor erased — with the span's text as the engine
indexes it (:mod:`telha.domain.search_text`): SQLite's FTS5 (``search_fts``, external content
over ``search_spans``, kept here statement by statement) cuts and folds it, PostgreSQL stores
the words Telha cut and folded as a ``tsvector`` under a GIN index.

:func:`sync_source` is the one function every write that changes which version of a source
is current calls, in its own transaction, right after it recorded the change
(:func:`telha.storage.core.sources.note_versions`): a publish (which supersedes), a retire
(an archive's new version retiring members too) and an erasure's ``mark``. So a superseded,
retired or erased version leaves the index in the transaction that closes it.
:func:`purge_erased` then rewrites what could still hold an erased version's words
(SQLite: FTS5 keeps a deleted row's words in its index segments until they are merged).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from telha.domain.erasure import node_ids
from telha.domain.search_text import fts5_body, tsvector_literal, words
from telha.offload import off_loop
from telha.storage.core.tx import Tx

__all__ = ["SEARCH_COLS", "purge_erased", "set_search", "sync_source"]

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
    rows = await tx.fetchall(
        "SELECT node_id, labels FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_from = ?",
        sid, source_id, at,
    )  # fmt: skip
    found = {bytes(n): str(labels) for n, labels in rows}
    rest = sorted(ids - found.keys())
    step = max(len(rest), 1) if tx.postgres else _BATCH
    for i in range(0, len(rest), step):
        cond, params = tx.any("node_id", rest[i : i + step], "bytea")
        for n, labels in await tx.fetchall(
            f"SELECT node_id, labels FROM nodes WHERE scope_id = ? AND {cond}"
            " AND tx_to IS NULL",
            sid, *params,
        ):  # fmt: skip
            found.setdefault(bytes(n), str(labels))
    return found


def _rows(
    sid: int,
    source_id: bytes,
    at: int,
    fmt: str,
    text: bytes,
    spans: Sequence[tuple[Any, ...]],
    labels: dict[bytes, str],
    postgres: bool,
) -> list[tuple[Any, ...]]:
    """The ``search_spans`` rows of a version's span rows ``(start, end, kind, linked)``:
    SQLite's body is the span's text for FTS5 to cut (:func:`fts5_body`), PostgreSQL's the
    ``tsvector`` of its words (:func:`tsvector_literal`)."""
    out = []
    cached: dict[str, list[str]] = {}
    for start, end, kind, linked in spans:
        span = text[start:end].decode("utf-8", "replace")
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


async def _index_version(
    tx: Tx, sid: int, source_id: bytes, at: int, blob_id: bytes | None, fmt: str
) -> None:
    """Index every span row of the source's version written at ``at``."""
    spans = await tx.fetchall(
        'SELECT start, "end", kind, linked_nodes FROM span_rows WHERE scope_id = ?'
        ' AND source_id = ? AND source_version_tx = ? ORDER BY start, "end"',
        sid, source_id, at,
    )  # fmt: skip
    if not spans or blob_id is None:
        return
    chunks = await tx.fetchall(
        "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? ORDER BY idx",
        sid, blob_id,
    )  # fmt: skip
    text = b"".join(bytes(c[0]) for c in chunks)
    ids = {n for *_, linked in spans for n in node_ids(bytes(linked))}
    labels = await _labels(tx, sid, source_id, at, ids)
    args = (sid, source_id, at, fmt, text, spans, labels, tx.postgres)
    if tx.postgres:  # an operation runs on the event loop there: large texts go to a thread
        rows = await off_loop(len(text), _rows, *args)
        await tx.executemany(_INSERT_PG, rows)
    else:  # SQLite runs the operation on its writer's thread already
        await tx.executemany(_INSERT_SQLITE, _rows(*args))
        await tx.execute(
            "INSERT INTO search_fts (rowid, scope_id, body) SELECT rowid, scope_id, body"
            " FROM search_spans WHERE scope_id = ? AND source_id = ? AND version_tx = ?",
            sid, source_id, at,
        )  # fmt: skip


async def sync_source(tx: Tx, sid: int, source_id: bytes) -> None:
    """Make the index hold exactly the span rows of the source's current version: rows of
    any other version are deleted, the current one's written if missing. A no-op when the
    store runs with ``[search] enabled = false`` (:attr:`Tx.search`)."""
    if not tx.search:
        return
    current = await _current(tx, sid, source_id)
    rows = await tx.fetchall(
        "SELECT DISTINCT version_tx FROM search_spans WHERE scope_id = ? AND source_id = ?",
        sid, source_id,
    )  # fmt: skip
    have = {int(r[0]) for r in rows}
    want = {current[0]} if current is not None else set()
    if have == want:
        return
    if have:
        if not tx.postgres:  # the words leave FTS5 first: its 'delete' needs the stored body
            await tx.execute(
                "INSERT INTO search_fts (search_fts, rowid, scope_id, body) SELECT 'delete',"
                " rowid, scope_id, body FROM search_spans WHERE scope_id = ? AND source_id = ?",
                sid, source_id,
            )  # fmt: skip
        await tx.execute(
            "DELETE FROM search_spans WHERE scope_id = ? AND source_id = ?", sid, source_id
        )
    if current is not None:
        await _index_version(tx, sid, source_id, *current)


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
    index not built (a database from before search, or one run with search disabled) builds
    it from every source's current version; disabled empties it (a later start with search
    enabled builds it again). Returns whether it built the index."""
    row = await tx.fetchone(f"SELECT enabled FROM search_state WHERE id = 1{tx.for_update}")
    built = row is not None and bool(row[0])
    if built == tx.search:
        return False
    if not tx.postgres:
        await tx.execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
    await tx.execute("DELETE FROM search_spans")
    await purge_erased(tx)
    if tx.search:
        for sid, source_id in await tx.fetchall(
            "SELECT scope_id, source_id FROM sources ORDER BY scope_id, source_id"
        ):
            await sync_source(tx, int(sid), bytes(source_id))
    await tx.execute("UPDATE search_state SET enabled = ? WHERE id = 1", int(tx.search))
    return tx.search
