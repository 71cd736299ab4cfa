"""Engine-neutral pieces of the storage engines: stored rows back as :mod:`telha.domain.model`
records, the dedup rules (docs/architecture.md, "Dedup"), the streaming checkpoint's
encoding. Pure; no I/O.

Each engine selects its columns in the order these functions unpack them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from telha.domain.canonical import is_boundary
from telha.domain.dedup import Latest, same_identity
from telha.domain.errors import RequestError
from telha.domain.model import (
    BLOB_CHUNK,
    Changes,
    Continuation,
    Dedup,
    JobEvent,
    JobRecord,
    NewVersion,
    NodeVersion,
    ProvenanceSpan,
    Scope,
    SourceVersion,
)

__all__ = [
    "decode_continuation",
    "encode_continuation",
    "is_duplicate",
    "job_record",
    "node_record",
    "slice_chunks",
    "slice_text",
    "version_record",
    "with_children",
]

_decode = msgspec.json.decode
#: Position of ``changes`` among :class:`~telha.domain.model.SourceVersion`'s fields.
_CHANGES = 16
#: Position of ``identity`` (stored as text, a ``bytes`` field).
_IDENTITY = 20


def job_record(row: Any, events: tuple[JobEvent, ...] = ()) -> JobRecord:
    """A job from ``(job_id, tenant, org, kind, format, source_id, content_hash, payload,
    state, attempts, lease_generation, lease_owner, lease_deadline µs, available_at µs,
    failure_reason, stats)``."""
    (job_id, tenant, org, kind, fmt, source_id, chash, payload, state, attempts, gen, owner,
     deadline, available_at, reason, stats) = row  # fmt: skip
    return JobRecord(
        job_id, Scope(tenant, org), kind, fmt, source_id, chash, payload, state, attempts,
        gen, owner, deadline, available_at, reason, stats, events,
    )  # fmt: skip


def version_record(row: Any) -> SourceVersion:
    """A version from its row in :class:`~telha.domain.model.SourceVersion` field order
    (``changes`` as its stored JSON, decoded here)."""
    fields = list(row)
    if len(fields) > _CHANGES and fields[_CHANGES] is not None:
        fields[_CHANGES] = Changes.from_stats(_decode(fields[_CHANGES]))
    if len(fields) > _IDENTITY and isinstance(fields[_IDENTITY], str):
        fields[_IDENTITY] = fields[_IDENTITY].encode()
    return SourceVersion(*fields)


def node_record(row: Any) -> NodeVersion:
    """A node version from ``(node_id, labels JSON, properties JSON, tx_from, tx_to,
    valid_from, valid_to, provenance JSON [[start, end], ...], source_id)``; provenance spans
    are byte offsets into the version ``(source_id, tx_from)`` that wrote it, or with a third
    element ``[start, end, tx]`` into ``(source_id, tx)`` (a version an erasure appended keeps
    the spans of the surviving version it stands on)."""
    node_id, labels, props, tx_from, tx_to, valid_from, valid_to, prov, source_id = row
    spans = [
        ProvenanceSpan(source_id, s[2] if len(s) > 2 else tx_from, s[0], s[1])
        for s in _decode(prov)
    ]
    return NodeVersion(
        node_id, _decode(labels), _decode(props), tx_from, tx_to, valid_from, valid_to, spans
    )


def is_duplicate(latest: Latest | None, v: NewVersion, canonical_hash: bytes, dedup: Dedup) -> bool:
    """The dedup rules (docs/architecture.md, "Dedup, identity and versions") for committing
    ``v`` against the source's latest published version (``None``: a new source): the same
    identity (:func:`telha.domain.dedup.same_identity`: bytes and fingerprint, not retired);
    at submit time also the same canonical text, written by another job."""
    if dedup is Dedup.NONE or latest is None:
        return False
    if not same_identity(latest, v.content_hash, v.fingerprint):
        return False
    if dedup is Dedup.CONTENT:
        return True
    # Submit time: a retry of the same job must re-apply (crash recovery), not dedup.
    return bool(latest.canonical_hash == canonical_hash and latest.job_id != v.job_id)


def decode_continuation(blob: bytes) -> Continuation:
    """A stored streaming checkpoint (msgpack) back as a :class:`Continuation`."""
    return msgspec.msgpack.decode(blob, type=Continuation)


def encode_continuation(c: Continuation) -> bytes:
    """A streaming checkpoint as stored on the job row (msgpack)."""
    return msgspec.msgpack.encode(c)


def slice_chunks(length: int, start: int | None, end: int | None) -> tuple[int, int, int, int]:
    """The byte range ``[lo, hi)`` a slice request names in a text of ``length`` bytes
    (``None``: from the start / to the end) and the chunk indexes ``first..last`` holding it
    (chunks of :data:`telha.domain.model.BLOB_CHUNK` bytes; ``last`` includes the byte at ``hi``,
    whose boundary is checked; meaningless for an empty text). An ``end`` past the text's
    end is taken as its end (``hi`` is then ``length``: what exists is returned, as a Python
    slice does; docs/rest-api.md, "Reading text").

    :raises RequestError: ``start`` after ``end``, or ``start`` past the text's end (a
        start there is a wrong offset, not a short read).
    """
    lo = 0 if start is None else start
    hi = length if end is None else end
    if lo > hi:
        raise RequestError(f"start ({lo}) is after end ({hi})")
    if lo > length:
        raise RequestError(f"start ({lo}) is past the end of the text ({length} bytes)")
    hi = min(hi, length)
    return lo, hi, lo // BLOB_CHUNK, min(hi, length - 1) // BLOB_CHUNK


def slice_text(chunks: list[bytes], first: int, lo: int, hi: int) -> bytes:
    """``[lo, hi)`` of the text whose chunks ``first, first + 1, …`` are ``chunks``.

    :raises RequestError: a bound inside a UTF-8 character.
    """
    buf = b"".join(chunks)
    base = first * BLOB_CHUNK
    if not (is_boundary(buf, lo - base) and is_boundary(buf, hi - base)):
        raise RequestError(f"range [{lo}, {hi}) is not on UTF-8 character boundaries")
    return buf[lo - base : hi - base]


def with_children(stats: bytes | None, enqueued: int) -> bytes:
    """A job's ``stats`` JSON object with ``children`` set to the child jobs its completion
    really enqueued (a child deduplicated against an active job, or refused, not counted)."""
    fields = msgspec.json.decode(stats) if stats else {}
    if not isinstance(fields, dict):
        fields = {"worker": fields}
    return msgspec.json.encode({**fields, "children": enqueued})
