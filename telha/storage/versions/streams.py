"""Streaming multi-submit, written once for both engines (docs/architecture.md,
"Streaming").

The first part pins one source version (a fixed tx, no canonical hash yet, a provisional
uuid7 blob id); every part appends its text as 1 MiB chunks and writes its rows at the
pinned tx, in one transaction, and checkpoints a
:class:`~telha.domain.model.Continuation` on the job row, fenced by worker id and lease
generation; the final part re-hashes the stored chunks and rewrites the version row. The
decisions (fence, replay, seq and base checks) are the pure
:func:`telha.domain.streams.plan_part`.

Every part locks the job row (:func:`~telha.storage.jobs.lifecycle.check_lease`) and reads the
checkpoint under that lock, in the transaction that writes the part, so a re-lease on
another replica, the reaper or a second submission of the same job waits for it and then
sees the new generation or checkpoint. On PostgreSQL the locks come in the commit's order:
the job row, the advisory locks of a final part's child jobs, then the clock row (a first
part's pin).

A digest on the erasure blocklist is refused at the pin (the raw bytes' hash) and at the
finalize (the raw hash and the re-hashed canonical text): the job ends ``dead``
(``erased``) and, at the finalize, everything the stream wrote is deleted.
"""

from __future__ import annotations

from dataclasses import replace

import blake3

from telha.domain.canonical import is_boundary
from telha.domain.dedup import version_reason
from telha.domain.erasure import BLOCKED_REASON
from telha.domain.errors import InvalidStream
from telha.domain.ids import new_id
from telha.domain.model import (
    BLOB_CHUNK,
    Changes,
    Continuation,
    JobCompletion,
    LeaseRef,
    NewVersion,
    Scope,
    StreamOutcome,
    StreamPart,
)
from telha.domain.projection import Projection
from telha.domain.records import decode_continuation
from telha.domain.rows import PENDING_TX, VersionRows, build_rows
from telha.domain.streams import live_length, plan_part
from telha.storage.core.blocklist import blocked
from telha.storage.core.tx import Tx
from telha.storage.jobs.lifecycle import (
    abandon_stream,
    add_event,
    check_lease,
    complete,
    end_erased,
    latest_identity,
    store_continuation,
)
from telha.storage.versions.commit import current_nodes, insert_version
from telha.storage.versions.members import after_publish
from telha.storage.versions.publish import keep_edges, match, publish

__all__ = ["apply_stream_part", "purge_stream", "stream_base"]


def _chunks(length: int) -> int:
    """Chunks a text of ``length`` bytes fills."""
    return (length + BLOB_CHUNK - 1) // BLOB_CHUNK


async def _extend(tx: Tx, job_id: bytes, deadline: int) -> None:
    await tx.execute("UPDATE jobs SET lease_deadline = ? WHERE job_id = ?", deadline, job_id)


async def _on_boundary(tx: Tx, sid: int, blob_id: bytes, pos: int) -> bool:
    """Whether byte ``pos`` of the stored text is not inside a UTF-8 sequence (a position at
    or past the end is)."""
    row = await tx.fetchone(
        "SELECT substr(data, ?, 1) FROM blob_chunks WHERE scope_id = ? AND blob_id = ?"
        " AND idx = ?",
        pos % BLOB_CHUNK + 1, sid, blob_id, pos // BLOB_CHUNK,
    )  # fmt: skip
    return row is None or is_boundary(bytes(row[0] or b""), 0)


async def _append(tx: Tx, sid: int, c: Continuation, text: bytes) -> None:
    """Append ``text`` to the stream's chunks: the last chunk is filled up to 1 MiB, the
    rest goes into new chunks."""
    view = memoryview(text)
    pos = 0
    fill = c.length % BLOB_CHUNK
    if fill and text:
        room = BLOB_CHUNK - fill
        data = tx.dialect.blob_append("data")
        await tx.execute(
            f"UPDATE blob_chunks SET data = {data} WHERE scope_id = ? AND blob_id = ?"
            " AND idx = ?",
            view[:room].tobytes(), sid, c.blob_id, c.length // BLOB_CHUNK,
        )  # fmt: skip
        pos = min(room, len(text))
    await tx.executemany(
        "INSERT INTO blob_chunks (scope_id, blob_id, idx, data) VALUES (?, ?, ?, ?)",
        [
            (sid, c.blob_id, (c.length + i) // BLOB_CHUNK, view[i : i + BLOB_CHUNK].tobytes())
            for i in range(pos, len(text), BLOB_CHUNK)
        ],
    )


async def _hash_chunks(tx: Tx, sid: int, c: Continuation) -> bytes:
    """BLAKE3 of the text as persisted (the finalize re-hashes from storage), read one chunk
    at a time (bounded memory)."""
    h = blake3.blake3()
    for idx in range(c.next_chunk):
        row = await tx.fetchone(
            "SELECT data FROM blob_chunks WHERE scope_id = ? AND blob_id = ? AND idx = ?",
            sid, c.blob_id, idx,
        )  # fmt: skip
        if row is not None:
            h.update(row[0])
    return h.digest()


async def purge_stream(tx: Tx, sid: int, source_id: bytes, tx_pin: int) -> None:
    """Delete everything a stream pinned at ``tx_pin`` wrote (its version row, text, nodes,
    labels, edges, spans, ambiguities), after :func:`~telha.storage.jobs.lifecycle.abandon_stream`
    gave the versions it had closed back their ends: a stream whose content turned out
    blocklisted at the finalize leaves nothing."""
    key = (sid, source_id, tx_pin)
    row = await tx.fetchone(
        "SELECT blob_id FROM source_versions WHERE scope_id = ? AND source_id = ? AND tx = ?",
        *key,
    )
    if row is not None and row[0] is not None:
        await tx.execute("DELETE FROM blob_chunks WHERE scope_id = ? AND blob_id = ?", sid, row[0])
    await tx.execute(
        "DELETE FROM source_versions WHERE scope_id = ? AND source_id = ? AND tx = ?", *key
    )
    await tx.execute(
        "DELETE FROM span_rows WHERE scope_id = ? AND source_id = ? AND source_version_tx = ?",
        *key,
    )
    for half in tx.dialect.version_halves():
        await tx.execute(
            f"DELETE FROM nodes WHERE scope_id = ? AND source_id = ? AND tx_from = ?{half}", *key
        )
    for table, col in (("node_labels", "tx_from"), ("edges", "tx_from"), ("ambiguities", "tx")):
        await tx.execute(f"DELETE FROM {table} WHERE scope_id = ? AND {col} = ?", sid, tx_pin)


async def stream_base(tx: Tx, job_id: bytes, lease: LeaseRef, worker_id: str) -> int:
    """Bytes the job's live stream holds (0 when there is none, or it is another lease's):
    the ``base`` a partial's offsets are validated against before it is applied."""
    row = await tx.fetchone("SELECT continuation FROM jobs WHERE job_id = ?", job_id)
    if row is None or row[0] is None:
        return 0
    return live_length(decode_continuation(row[0]), worker_id, lease.lease_generation)


async def _pin(
    tx: Tx, sid: int, v: NewVersion, part: StreamPart, projection: Projection
) -> tuple[Continuation, VersionRows]:
    """The first part: the pinned version row (no canonical hash yet, a provisional uuid7
    blob id, no text length) at the next transaction time, and the part's text chunks and
    rows at that time."""
    explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
    existing = await current_nodes(tx, sid, explicit) if explicit else {}
    matched = await match(tx, sid, v.source_id, PENDING_TX, projection)
    blob_id = new_id()
    rows = await tx.rows_at_next_tx(
        lambda at: build_rows(sid, v.source_id, at, blob_id, projection, existing, match=matched),
    )
    tx_pin = rows.tx
    reason = version_reason(await latest_identity(tx, sid, v.source_id), v.content_hash, v.identity)
    await insert_version(tx, sid, tx_pin, v, None, blob_id, 0, reason)
    await keep_edges(tx, sid, v.source_id, rows)
    await tx.write_rows(rows)
    text = projection.canonical
    cont = Continuation(
        part.worker_id, part.lease.lease_generation, 0, tx_pin, blob_id, len(text),
        _chunks(len(text)), (),
    )  # fmt: skip
    return _counted(cont, rows), rows


def _counted(c: Continuation, rows: VersionRows) -> Continuation:
    """``c`` with a part's changes added and the version's root node, once known."""
    added, changed, unchanged = c.changes
    d = rows.changes
    counts = (added + d.added, changed + d.changed, unchanged + d.unchanged)
    return replace(c, changes=counts, root=c.root or rows.root)


async def _continue(
    tx: Tx, sid: int, v: NewVersion, c: Continuation, projection: Projection
) -> tuple[Continuation, VersionRows]:
    """A later part: every span offset into earlier text on a UTF-8 boundary, the text
    appended, the rows written at the pinned tx.

    :raises InvalidStream: an offset inside a UTF-8 sequence, or a node an earlier part wrote
        changed.
    """
    for pos in projection.earlier_offsets:
        if not await _on_boundary(tx, sid, c.blob_id, pos):
            raise InvalidStream(f"span offset {pos} is not on a UTF-8 boundary")
    text = projection.canonical
    await _append(tx, sid, c, text)
    explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
    existing = await current_nodes(tx, sid, explicit) if explicit else {}
    matched = await match(tx, sid, v.source_id, c.tx, projection)
    rows = build_rows(
        sid, v.source_id, c.tx, c.blob_id, projection, existing, chunks=False, match=matched
    )
    await keep_edges(tx, sid, v.source_id, rows)
    await tx.write_rows(rows)
    length = c.length + len(text)
    return _counted(replace(c, length=length, next_chunk=_chunks(length)), rows), rows


async def _finalize(
    tx: Tx, sid: int, v: NewVersion, c: Continuation, part: StreamPart
) -> tuple[str, ...] | None:
    """Finalize the stream: the version row gets its canonical hash and text length, and
    the job completes (returns the refused children's names). A blocklisted digest instead
    ends the job ``dead`` (``erased``) and purges what the stream wrote (returns
    ``None``)."""
    canonical = await _hash_chunks(tx, sid, c)
    if await blocked(tx, sid, (part.content_hash or v.content_hash, canonical)):
        await end_erased(tx, part.lease.job_id, part.now_us, BLOCKED_REASON)
        await purge_stream(tx, sid, v.source_id, c.tx)
        return None
    await tx.execute(
        "UPDATE source_versions SET canonical_text_hash = ?, text_len = ?,"
        " content_hash = coalesce(?, content_hash) WHERE scope_id = ? AND source_id = ?"
        " AND tx = ?",
        canonical, c.length, part.content_hash, sid, v.source_id, c.tx,
    )  # fmt: skip
    added, changed, unchanged = c.changes
    at = await tx.next_tx()
    changes = await publish(
        tx, sid, v.source_id, c.tx, at, Changes(added, changed, unchanged), c.root
    )
    await after_publish(tx, sid, v.source_id, v.job_id, c.root, c.tx, at)
    stats = changes.into_stats(part.stats)
    completion = JobCompletion(part.lease, part.now_us, stats, part.children)
    return await complete(tx, sid, completion, f"version={c.tx} {changes.detail()}")


async def apply_stream_part(
    tx: Tx, scope: Scope, version: NewVersion, projection: Projection, part: StreamPart
) -> StreamOutcome:
    """Apply one streamed submission in one transaction (see the module docstring).

    :raises telha.domain.errors.StaleLease: the caller does not hold the job.
    :raises OutOfSync: a seq that is neither the next one nor a replay of the last, or a
        part built on a different text length than the stream holds.
    :raises InvalidStream: a span offset in earlier text is not on a UTF-8 boundary.
    """
    job_id = part.lease.job_id
    _, _, blob = await check_lease(tx, part.lease)
    sid = await tx.scope_id(scope)
    if not part.partial:
        # Before the clock row (taken last): the publish locks the version's source, the
        # child enqueues lock theirs.
        await tx.lock_sources(sid, [version.source_id, *(c.source_id for c in part.children)])
    plan = plan_part(decode_continuation(blob) if blob is not None else None, part)
    if plan.abandon:
        await abandon_stream(tx, job_id, part.now_us, blob)
    deadline = part.now_us + part.lease_us
    if plan.replay:
        assert plan.live is not None
        await _extend(tx, job_id, deadline)
        return StreamOutcome(list(plan.live.node_ids), plan.live.tx, deadline, replay=True)
    if plan.live is None:
        if await blocked(tx, sid, (version.content_hash,)):
            await end_erased(tx, job_id, part.now_us, BLOCKED_REASON)
            return StreamOutcome([], 0, 0, erased=True)
        cont, rows = await _pin(tx, sid, version, part, projection)
    else:
        cont, rows = await _continue(tx, sid, version, plan.live, projection)
    detail = f"seq={part.seq} bytes={len(projection.canonical)} nodes={len(rows.node_ids)}"
    await add_event(tx, job_id, part.now_us, "partial", detail)
    cont = replace(cont, next_seq=part.seq + 1, node_ids=tuple(rows.node_ids))
    if part.partial:
        await store_continuation(tx, job_id, cont, part.now_us)
        await _extend(tx, job_id, deadline)
        return StreamOutcome(rows.node_ids, cont.tx, deadline)
    refused = await _finalize(tx, sid, version, cont, part)
    if refused is None:
        return StreamOutcome([], cont.tx, 0, erased=True)
    return StreamOutcome(rows.node_ids, cont.tx, 0, finalized=True, refused_children=refused)
