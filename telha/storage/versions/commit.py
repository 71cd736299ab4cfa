"""Source versions, written once for both engines (docs/architecture.md, "The
storage seam"): the version commit of a submission or an upload with its dedup, blocklist
and job completion; the upsert ladder's read of current nodes; whether a source has a version.

The commit takes its locks in one order on PostgreSQL — the job row (the lease fence), the
``(scope, source)`` advisory locks of the version and its child jobs (dedup), the current
rows of explicit node ids, the clock row (the transaction time) last — so a concurrent
commit of the same bytes waits on the source lock and then finds this version: exactly one
is written. SQLite's single writer serialises the same steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from telha.domain.dedup import version_reason
from telha.domain.erasure import BLOCKED_REASON, ERASED_MESSAGE
from telha.domain.errors import ContentErased
from telha.domain.model import (
    CommitOutcome,
    Dedup,
    JobCompletion,
    NewVersion,
    Scope,
)
from telha.domain.projection import Projection
from telha.domain.records import decode_continuation, is_duplicate
from telha.domain.rows import PENDING_TX, Existing, build_rows
from telha.domain.streams import single_shot_allowed
from telha.storage.core.tx import Rollback, Tx, any_groups
from telha.storage.jobs.lifecycle import (
    abandon_stream,
    blocked_latest,
    complete,
    end_erased,
    fence_held,
)
from telha.storage.versions.members import after_publish
from telha.storage.versions.publish import Known, has_earlier, keep_edges, match, publish

__all__ = [
    "IDENTITY_COLS",
    "VERSION_COLS",
    "commit",
    "current_nodes",
    "has_version",
    "insert_version",
]

#: The columns of a ``source_versions`` row a commit writes (after ``scope_id``), in
#: :class:`~telha.domain.model.SourceVersion` field order.
VERSION_COLS = (
    "source_id, tx, name, format, content_hash, canonical_text_hash, size, worker, job_id,"
    " blob_id, text_len"
)
#: The identity columns a commit writes after :data:`VERSION_COLS` (and reads select last,
#: in :class:`~telha.domain.model.SourceVersion` field order).
IDENTITY_COLS = "fingerprint, identity, reason"


async def current_nodes(tx: Tx, sid: int, ids: Sequence[bytes]) -> Existing:
    """Current ``(labels JSON, properties JSON, valid_from, valid_to, tx_from, source_id)``
    of the given node ids (the upsert ladder), read inside the transaction; where a node has
    several open rows (an unpublished stream's beside the published one) the latest wins. On
    PostgreSQL the rows are locked (in id order) so a concurrent commit cannot close them
    between this read and this transaction's write."""
    wanted = sorted(set(ids))
    found: Existing = {}
    for cond, params in any_groups(tx, "node_id", wanted, "bytea"):
        for node_id, labels, props, vfrom, vto, tx_from, source in await tx.fetchall(
            "SELECT node_id, labels, properties, valid_from, valid_to, tx_from, source_id"
            f" FROM nodes WHERE scope_id = ? AND tx_to IS NULL AND {cond}"
            f" ORDER BY node_id, tx_from{tx.for_update}",
            sid, *params,
        ):  # fmt: skip
            found[node_id] = (labels, bytes(props), vfrom, vto, tx_from, source)
    return found


async def insert_version(
    tx: Tx,
    sid: int,
    tx_time: int,
    v: NewVersion,
    canonical_hash: bytes | None,
    blob_id: bytes,
    text_len: int,
    reason: str | None,
) -> None:
    """Write a ``source_versions`` row (``canonical_hash`` ``None``: a stream's pinned
    version, not a version yet) with its identity and ``reason``
    (:func:`telha.domain.dedup.version_reason`)."""
    identity = v.identity.decode() if v.identity is not None else None
    await tx.execute(
        f"INSERT INTO source_versions (scope_id, {VERSION_COLS}, {IDENTITY_COLS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        sid, v.source_id, tx_time, v.name, v.format, v.content_hash, canonical_hash, v.size,
        v.worker, v.job_id, blob_id, text_len, v.fingerprint, identity, reason,
    )  # fmt: skip


async def has_version(tx: Tx, scope: Scope, source_id: bytes) -> bool:
    """Whether the source has a published version (a read before a commit's transaction)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return False
    return await has_earlier(tx, sid, source_id, PENDING_TX)


async def commit(
    tx: Tx,
    scope: Scope,
    version: NewVersion,
    projection: Projection,
    canonical_hash: bytes,
    blob_id: bytes,
    dedup: Dedup,
    completion: JobCompletion | None,
) -> CommitOutcome:
    """:meth:`~telha.storage.protocol.Storage.commit_version` as one transaction, in lock
    order (see the module docstring):

    1. with a completion, the lease fence; the caller's own open stream makes the single
       shot out of sequence, another lease's stream is abandoned (a retry of a job whose
       earlier attempt streamed);
    2. a digest of the version on the blocklist: an upload is refused
       (:class:`ContentErased`, nothing written), a job ends ``dead`` (``erased``);
    3. a duplicate of the latest version (:func:`telha.domain.records.is_duplicate`) writes
       no rows: an upload rolls back, a job completes ``deduplicated``, enqueuing only its
       fetch children (no content: a recrawl's linked pages, each deduplicated on its own
       fetched bytes); children carrying content came from the same bytes and are dropped;
    4. otherwise the version row and its rows at the next transaction time, and the job's
       completion with its child jobs.

    :raises StaleLease: the completion's lease is not held.
    :raises OutOfSync: the submitting worker has a stream open under this lease.
    :raises ContentErased: an upload (no completion) of blocklisted content.
    """
    children = completion.children if completion is not None else ()
    blob = parent = None
    if completion is not None:
        _, _, blob, parent = await fence_held(tx, completion.lease)
    sid = await tx.scope_id(scope)
    await tx.lock_sources(sid, (version.source_id, *(c.source_id for c in children)))
    if completion is not None:
        cont = decode_continuation(blob) if blob is not None else None
        single_shot_allowed(cont, completion.worker_id, completion.lease.lease_generation)
        await abandon_stream(tx, completion.lease.job_id, completion.now_us, blob)
    digests = (version.content_hash, canonical_hash)
    erased, latest = await blocked_latest(tx, sid, digests, version.source_id)
    if erased:
        if completion is None:
            raise ContentErased(ERASED_MESSAGE)
        await end_erased(tx, completion.lease.job_id, completion.now_us, BLOCKED_REASON)
        return CommitOutcome(False, None, [], [], erased=True)
    if is_duplicate(latest, version, canonical_hash, dedup):
        if completion is None:
            raise Rollback(CommitOutcome(True, None, [], []))
        # A duplicate writes no rows; its fetch children still run (a recrawl of an
        # unchanged index must reach changed pages it links to).
        fetches = tuple(c for c in children if c.content_hash is None)
        await complete(tx, sid, replace(completion, children=fetches), "deduplicated")
        return CommitOutcome(True, None, [], [])
    explicit = [n.node_id for n in projection.nodes if n.node_id is not None]
    existing = await current_nodes(tx, sid, explicit) if explicit else {}
    # Read once, here, under the source's lock: the match, the kept edges, the publish and
    # the archive rule take it from ``known`` (bench/RESULTS.md, "Fewer statements per job").
    known = Known(latest.tx if latest is not None else None)
    matched = await match(
        tx, sid, version.source_id, PENDING_TX, projection, whole=True, known=known
    )
    rows = await tx.rows_at_next_tx(
        lambda at: build_rows(
            sid, version.source_id, at, blob_id, projection, existing, match=matched
        ),
    )
    tx_time = rows.tx
    reason = version_reason(latest, version.content_hash, version.identity)
    await insert_version(
        tx, sid, tx_time, version, canonical_hash, blob_id, len(projection.canonical), reason
    )
    await keep_edges(tx, sid, version.source_id, rows, known)
    await tx.write_rows(rows)
    changes = await publish(
        tx, sid, version.source_id, tx_time, tx_time, rows.changes, rows.root, known
    )
    await after_publish(
        tx, sid, version.source_id, version.job_id, rows.root, tx_time, tx_time,
        known=known, child=completion is None or parent is not None,
    )  # fmt: skip
    refused: tuple[str, ...] = ()
    if completion is not None:
        detail = f"version={tx_time} nodes={len(rows.node_ids)} {changes.detail()}"
        done = replace(completion, stats=changes.into_stats(completion.stats))
        refused = await complete(tx, sid, done, detail)
    return CommitOutcome(
        False, tx_time, rows.node_ids, rows.edge_ids, refused_children=refused, changes=changes
    )
