"""Streaming multi-submit on SQLite (spec 004 "The streaming multi-submit protocol").

The first partial pins one source version (a fixed tx, no canonical hash yet, a provisional
uuid7 blob id); every partial appends its text as 1 MiB chunks and writes its rows at the
pinned tx, in one transaction, and checkpoints an ``IngestContinuation`` on the job row,
fenced by worker id and lease generation; the final submission re-hashes the stored chunks
and rewrites the version row. A stream abandoned by a lost lease is closed: its rows get
``tx_to = tx_from`` (visible at no time), node versions it had closed are reopened, and its
version row keeps no canonical hash, so no read returns it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import blake3

from telha.domain.erasure import BLOCKED_REASON
from telha.domain.errors import InvalidStream, OutOfSync
from telha.domain.ids import new_id
from telha.domain.model import (
    BLOB_CHUNK,
    Continuation,
    JobCompletion,
    LeaseRef,
    NewVersion,
    Scope,
    StreamOutcome,
    StreamPart,
)
from telha.domain.projection import Projection
from telha.storage.sqlite.base import SqliteBase, blocked
from telha.storage.sqlite.erasure import purge_stream
from telha.storage.sqlite.jobs import (
    abandon_stream,
    add_event,
    check_lease,
    complete_tx,
    decode_continuation,
    end_erased,
    load_continuation,
    store_continuation,
)
from telha.storage.sqlite.reads import VERSION_COLS
from telha.storage.sqlite.rows import build_rows, current_nodes, insert_rows

__all__ = ["StreamsMixin"]


def _extend(conn: sqlite3.Connection, job_id: bytes, deadline: int) -> None:
    conn.execute("UPDATE jobs SET lease_deadline = ? WHERE job_id = ?", (deadline, job_id))


def _byte_at(conn: sqlite3.Connection, sid: int, blob_id: bytes, pos: int) -> int | None:
    row = conn.execute(
        "SELECT substr(data, ?, 1) FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx = ?",
        (pos % BLOB_CHUNK + 1, sid, blob_id, pos // BLOB_CHUNK),
    ).fetchone()
    return row[0][0] if row and row[0] else None


def _append(conn: sqlite3.Connection, sid: int, c: Continuation, text: bytes) -> tuple[int, int]:
    """Append ``text`` to the stream's chunks; returns the new ``(length, next_chunk)``."""
    view = memoryview(text)
    pos = 0
    fill = c.length % BLOB_CHUNK
    if fill and text:
        room = BLOB_CHUNK - fill
        key = (sid, c.blob_id, c.length // BLOB_CHUNK)
        (last,) = conn.execute(
            "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx = ?", key
        ).fetchone()
        # Bytes in Python: SQLite's || would turn the BLOB into TEXT.
        conn.execute(
            "UPDATE blob_chunks SET data = ? WHERE scope_id = ? AND blob_id = ? AND idx = ?",
            (bytes(last) + view[:room].tobytes(), *key),
        )
        pos = min(room, len(text))
    rows = [
        (sid, c.blob_id, (c.length + i) // BLOB_CHUNK, view[i : i + BLOB_CHUNK].tobytes())
        for i in range(pos, len(text), BLOB_CHUNK)
    ]
    conn.executemany(
        "INSERT INTO blob_chunks (scope_id, blob_id, idx, data) VALUES (?, ?, ?, ?)", rows
    )
    length = c.length + len(text)
    return length, (length + BLOB_CHUNK - 1) // BLOB_CHUNK


def _hash_chunks(conn: sqlite3.Connection, sid: int, blob_id: bytes) -> bytes:
    """BLAKE3 of what was persisted (spec 004: finalize re-hashes from storage)."""
    h = blake3.blake3()
    for (data,) in conn.execute(
        "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? ORDER BY idx",
        (sid, blob_id),
    ):
        h.update(data)
    return h.digest()


class StreamsMixin(SqliteBase):
    """Streamed submissions; see :class:`telha.storage.protocol.Storage`."""

    async def stream_base(self, job_id: bytes, lease: LeaseRef, worker_id: str) -> int:
        """Bytes the job's live stream holds (0 when there is none, or it is another lease's):
        the ``base`` a partial's offsets are validated against before it is applied."""
        rows = await self._fetchall("SELECT continuation FROM jobs WHERE job_id = ?", (job_id,))
        if not rows or rows[0][0] is None:
            return 0
        c = decode_continuation(rows[0][0])
        fenced = c.worker_id == worker_id and c.lease_generation == lease.lease_generation
        return c.length if fenced else 0

    async def apply_stream_part(
        self, scope: Scope, version: NewVersion, projection: Projection, part: StreamPart
    ) -> StreamOutcome:
        """Apply one streamed submission in one transaction (see the module docstring).

        :raises telha.domain.errors.StaleLease: the caller does not hold the job.
        :raises OutOfSync: a seq that is neither the next one nor a replay of the last, or a
            partial built on a different text length than the stream holds.
        :raises InvalidStream: a span offset in earlier text is not on a UTF-8 boundary.
        """
        job_id = part.lease.job_id

        def tx(conn: sqlite3.Connection) -> StreamOutcome:
            check_lease(conn, part.lease)
            sid = self._tx_scope_id(conn, scope)
            cont = load_continuation(conn, job_id)
            fenced = cont is not None and (cont.worker_id, cont.lease_generation) == (
                part.worker_id,
                part.lease.lease_generation,
            )
            if cont is not None and not fenced:
                abandon_stream(conn, job_id, part.now_us)
                cont = None
            deadline = part.now_us + part.lease_us
            if cont is not None and part.partial and part.seq + 1 == cont.next_seq:
                _extend(conn, job_id, deadline)
                return StreamOutcome(list(cont.node_ids), cont.tx, deadline, replay=True)
            expected = 0 if cont is None else cont.next_seq
            if part.seq != expected:
                raise OutOfSync(f"expected seq {expected}, got {part.seq}")
            if cont is None:
                if blocked(conn, sid, (version.content_hash,)):
                    end_erased(conn, job_id, part.now_us, BLOCKED_REASON)
                    return StreamOutcome([], 0, 0, erased=True)
                cont = self._pin(conn, sid, version, part)
            if part.base != cont.length:
                raise OutOfSync(
                    f"partial built on {part.base} bytes; the stream holds {cont.length}"
                )
            for pos in projection.earlier_offsets:
                byte = _byte_at(conn, sid, cont.blob_id, pos)
                if byte is not None and (byte & 0xC0) == 0x80:
                    raise InvalidStream(f"span offset {pos} is not on a UTF-8 boundary")
            length, next_chunk = _append(conn, sid, cont, projection.canonical)
            explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
            existing = current_nodes(conn, sid, explicit) if explicit else {}
            rows = build_rows(
                sid, version.source_id, cont.tx, cont.blob_id, projection, existing, chunks=False
            )
            insert_rows(conn, rows)
            detail = f"seq={part.seq} bytes={len(projection.canonical)} nodes={len(rows.node_ids)}"
            add_event(conn, job_id, part.now_us, "partial", detail)
            cont = replace(
                cont, next_seq=part.seq + 1, length=length, next_chunk=next_chunk,
                node_ids=tuple(rows.node_ids),
            )  # fmt: skip
            if part.partial:
                store_continuation(conn, job_id, cont, part.now_us)
                _extend(conn, job_id, deadline)
                return StreamOutcome(rows.node_ids, cont.tx, deadline)
            refused = self._finalize(conn, sid, version, cont, part)
            if refused is None:
                return StreamOutcome([], cont.tx, 0, erased=True)
            return StreamOutcome(
                rows.node_ids, cont.tx, 0, finalized=True, refused_children=refused
            )

        return await self._write("apply streamed submission", tx)

    def _pin(
        self, conn: sqlite3.Connection, sid: int, v: NewVersion, part: StreamPart
    ) -> Continuation:
        tx = self._clock.next()
        blob_id = new_id()
        conn.execute(
            f"INSERT INTO source_versions (scope_id, {VERSION_COLS})"
            " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, 0)",
            (sid, v.source_id, tx, v.name, v.format, v.content_hash, v.size, v.worker,
             v.job_id, blob_id),
        )  # fmt: skip
        return Continuation(part.worker_id, part.lease.lease_generation, 0, tx, blob_id, 0, 0, ())

    @staticmethod
    def _finalize(
        conn: sqlite3.Connection, sid: int, v: NewVersion, c: Continuation, part: StreamPart
    ) -> tuple[str, ...] | None:
        """Finalize the stream: the version row gets its canonical hash and the job
        completes (returns the refused children's names). A blocklisted digest instead ends
        the job ``dead`` (``erased``) and purges what the stream wrote (returns ``None``)."""
        canonical = _hash_chunks(conn, sid, c.blob_id)
        if blocked(conn, sid, (part.content_hash or v.content_hash, canonical)):
            end_erased(conn, part.lease.job_id, part.now_us, BLOCKED_REASON)
            purge_stream(conn, sid, v.source_id, c.tx)
            return None
        conn.execute(
            "UPDATE source_versions SET canonical_text_hash = ?, text_len = ?,"
            " content_hash = coalesce(?, content_hash) WHERE scope_id = ? AND source_id = ?"
            " AND tx = ?",
            (canonical, c.length, part.content_hash, sid, v.source_id, c.tx),
        )
        completion = JobCompletion(part.lease, part.now_us, part.stats, part.children)
        return complete_tx(conn, sid, completion, f"version={c.tx}")
