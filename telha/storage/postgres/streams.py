"""Streaming multi-submit on PostgreSQL (spec 004 "The streaming multi-submit protocol"),
with the rules of :mod:`telha.storage.sqlite.streams`: the first partial pins one source
version (a tx from the database clock, no canonical hash yet, a provisional uuid7 blob id);
every partial appends its text as 1 MiB chunks, writes its rows at the pinned tx and
checkpoints an ``IngestContinuation`` on the job row; the final submission re-hashes the
stored chunks and rewrites the version row.

Fencing: every part locks the job row (:func:`~telha.storage.postgres.jobs.check_lease`) and
reads the checkpoint under that lock, in the transaction that writes the part, so a re-lease
on another replica, the reaper or a second submission of the same job waits for it and then
sees the new generation or checkpoint.
"""

from __future__ import annotations

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
from telha.domain.rows import Existing, VersionRows, build_rows
from telha.storage.postgres.base import Conn, PgBase, blocked, lock_sources
from telha.storage.postgres.erasure import purge_stream
from telha.storage.postgres.jobs import (
    abandon_stream,
    add_event,
    check_lease,
    complete_tx,
    decode_continuation,
    end_erased,
    store_continuation,
)
from telha.storage.postgres.reads import VERSION_COLS
from telha.storage.postgres.rows import (
    PENDING_TX,
    TX,
    Batch,
    add_rows,
    current_nodes,
    insert_rows,
    insert_unnest,
)

__all__ = ["StreamsMixin"]


async def _extend(conn: Conn, job_id: bytes, deadline: int) -> None:
    await conn.execute("UPDATE jobs SET lease_deadline = $1 WHERE job_id = $2", deadline, job_id)


async def _byte_at(conn: Conn, sid: int, blob_id: bytes, pos: int) -> int | None:
    value = await conn.fetchval(
        "SELECT CASE WHEN length(data) > $1 THEN get_byte(data, $1) END FROM blob_chunks"
        " WHERE scope_id = $2 AND blob_id = $3 AND idx = $4",
        pos % BLOB_CHUNK,
        sid,
        blob_id,
        pos // BLOB_CHUNK,
    )
    return int(value) if value is not None else None


async def _append(conn: Conn, sid: int, c: Continuation, text: bytes) -> tuple[int, int]:
    """Append ``text`` to the stream's chunks; returns the new ``(length, next_chunk)``."""
    view = memoryview(text)
    pos = 0
    fill = c.length % BLOB_CHUNK
    if fill and text:
        room = BLOB_CHUNK - fill
        await conn.execute(
            "UPDATE blob_chunks SET data = data || $1 WHERE scope_id = $2 AND blob_id = $3"
            " AND idx = $4",
            view[:room].tobytes(),
            sid,
            c.blob_id,
            c.length // BLOB_CHUNK,
        )
        pos = min(room, len(text))
    rows = [
        (sid, c.blob_id, (c.length + i) // BLOB_CHUNK, view[i : i + BLOB_CHUNK].tobytes())
        for i in range(pos, len(text), BLOB_CHUNK)
    ]
    await insert_unnest(
        conn, "blob_chunks", "scope_id, blob_id, idx, data",
        ("integer", "bytea", "integer", "bytea"), rows,
    )  # fmt: skip
    length = c.length + len(text)
    return length, (length + BLOB_CHUNK - 1) // BLOB_CHUNK


async def _hash_chunks(conn: Conn, sid: int, blob_id: bytes) -> bytes:
    """BLAKE3 of what was persisted (spec 004: finalize re-hashes from storage), read one
    chunk at a time through a cursor (bounded memory)."""
    h = blake3.blake3()
    async for record in conn.cursor(
        "SELECT data FROM blob_chunks WHERE scope_id = $1 AND blob_id = $2 ORDER BY idx",
        sid,
        blob_id,
        prefetch=2,
    ):
        h.update(record[0])
    return h.digest()


class StreamsMixin(PgBase):
    """Streamed submissions; see :class:`telha.storage.protocol.Storage`."""

    async def stream_base(self, job_id: bytes, lease: LeaseRef, worker_id: str) -> int:
        """Bytes the job's live stream holds (0 when there is none, or it is another lease's):
        the ``base`` a partial's offsets are validated against before it is applied."""
        rows = await self._fetch("SELECT continuation FROM jobs WHERE job_id = $1", job_id)
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
        sid = await self._ensure_scope(scope)

        async def tx(conn: Conn) -> StreamOutcome:
            _, _, blob = await check_lease(conn, part.lease)
            if not part.partial and part.children:
                # Before the clock row (taken last): child enqueues lock their sources.
                await lock_sources(conn, sid, [child.source_id for child in part.children])
            cont = decode_continuation(blob) if blob is not None else None
            fenced = cont is not None and (cont.worker_id, cont.lease_generation) == (
                part.worker_id,
                part.lease.lease_generation,
            )
            if cont is not None and not fenced:
                await abandon_stream(conn, job_id, part.now_us, blob)
                cont = None
            deadline = part.now_us + part.lease_us
            if cont is not None and part.partial and part.seq + 1 == cont.next_seq:
                await _extend(conn, job_id, deadline)
                return StreamOutcome(list(cont.node_ids), cont.tx, deadline, replay=True)
            expected = 0 if cont is None else cont.next_seq
            if part.seq != expected:
                raise OutOfSync(f"expected seq {expected}, got {part.seq}")
            explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
            text = projection.canonical
            if cont is None:  # the first part pins the version
                if await _refused_first(conn, sid, version, part):
                    return StreamOutcome([], 0, 0, erased=True)
                existing = await current_nodes(conn, sid, explicit) if explicit else {}
                cont, rows = await _pin(conn, sid, version, part, projection, existing)
                length, next_chunk = len(text), (len(text) + BLOB_CHUNK - 1) // BLOB_CHUNK
            else:
                if part.base != cont.length:
                    raise OutOfSync(
                        f"partial built on {part.base} bytes; the stream holds {cont.length}"
                    )
                for pos in projection.earlier_offsets:
                    byte = await _byte_at(conn, sid, cont.blob_id, pos)
                    if byte is not None and (byte & 0xC0) == 0x80:
                        raise InvalidStream(f"span offset {pos} is not on a UTF-8 boundary")
                length, next_chunk = await _append(conn, sid, cont, text)
                existing = await current_nodes(conn, sid, explicit) if explicit else {}
                rows = build_rows(
                    sid, version.source_id, cont.tx, cont.blob_id, projection, existing,
                    chunks=False,
                )  # fmt: skip
                await insert_rows(conn, rows)
            detail = f"seq={part.seq} bytes={len(projection.canonical)} nodes={len(rows.node_ids)}"
            await add_event(conn, job_id, part.now_us, "partial", detail)
            cont = replace(
                cont, next_seq=part.seq + 1, length=length, next_chunk=next_chunk,
                node_ids=tuple(rows.node_ids),
            )  # fmt: skip
            if part.partial:
                await store_continuation(conn, job_id, cont, part.now_us)
                await _extend(conn, job_id, deadline)
                return StreamOutcome(rows.node_ids, cont.tx, deadline)
            refused = await _finalize(conn, sid, version, cont, part)
            if refused is None:
                return StreamOutcome([], cont.tx, 0, erased=True)
            return StreamOutcome(
                rows.node_ids, cont.tx, 0, finalized=True, refused_children=refused
            )

        return await self._write("apply streamed submission", tx)


async def _refused_first(conn: Conn, sid: int, v: NewVersion, part: StreamPart) -> bool:
    """Check a stream's first part: built on no text, and of content not blocklisted (else
    the job ends ``dead``, ``erased``, and ``True`` is returned).

    :raises OutOfSync: a first part built on earlier text.
    """
    if part.base != 0:
        raise OutOfSync(f"partial built on {part.base} bytes; the stream holds 0")
    if await blocked(conn, sid, (v.content_hash,)):
        await end_erased(conn, part.lease.job_id, part.now_us, BLOCKED_REASON)
        return True
    return False


async def _pin(
    conn: Conn,
    sid: int,
    v: NewVersion,
    part: StreamPart,
    projection: Projection,
    existing: Existing,
) -> tuple[Continuation, VersionRows]:
    """The first part: one statement takes the transaction time from the clock row (locked
    from here to the commit only) and writes the pinned version row (no canonical hash yet,
    a provisional uuid7 blob id), the part's text chunks and its rows at that time."""
    blob_id = new_id()
    rows = build_rows(sid, v.source_id, PENDING_TX, blob_id, projection, existing)
    batch = Batch(take_tx=True)
    values = [
        (sid, "integer"), (v.source_id, "bytea"), None, (v.name, "text"), (v.format, "text"),
        (v.content_hash, "bytea"), (None, "bytea"), (v.size, "bigint"), (v.worker, "text"),
        (v.job_id, "bytea"), (blob_id, "bytea"), (0, "bigint"),
    ]  # fmt: skip
    marks = ", ".join(TX if item is None else batch.param(*item) for item in values)
    batch.statement(f"INSERT INTO source_versions (scope_id, {VERSION_COLS}) VALUES ({marks})")
    add_rows(batch, rows)
    tx = await batch.run(conn)
    assert tx is not None
    cont = Continuation(part.worker_id, part.lease.lease_generation, 0, tx, blob_id, 0, 0, ())
    return cont, rows


async def _finalize(
    conn: Conn, sid: int, v: NewVersion, c: Continuation, part: StreamPart
) -> tuple[str, ...] | None:
    """Finalize the stream: the version row gets its canonical hash and the job completes
    (returns the refused children's names). A blocklisted digest instead ends the job
    ``dead`` (``erased``) and purges what the stream wrote (returns ``None``)."""
    canonical = await _hash_chunks(conn, sid, c.blob_id)
    if await blocked(conn, sid, (part.content_hash or v.content_hash, canonical)):
        await end_erased(conn, part.lease.job_id, part.now_us, BLOCKED_REASON)
        await purge_stream(conn, sid, v.source_id, c.tx)
        return None
    await conn.execute(
        "UPDATE source_versions SET canonical_text_hash = $1, text_len = $2,"
        " content_hash = coalesce($3, content_hash) WHERE scope_id = $4 AND source_id = $5"
        " AND tx = $6",
        canonical, c.length, part.content_hash, sid, v.source_id, c.tx,
    )  # fmt: skip
    completion = JobCompletion(part.lease, part.now_us, part.stats, part.children)
    return await complete_tx(conn, sid, completion, f"version={c.tx}")
