"""What the listings return and how they page (docs/rest-api.md, "Listings"): ``GET
/v1/sources`` and ``GET /v1/ingest``, newest first. Pure: records and the opaque cursor."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from telha.domain.errors import RequestError

__all__ = [
    "JOB_STATES",
    "SOURCE_STATES",
    "JobFamily",
    "JobFilter",
    "JobSummary",
    "Page",
    "SourceFilter",
    "SourceSummary",
    "VersionParent",
    "cursor_bytes",
    "decode_cursor",
    "encode_cursor",
]

#: How a listed source stands: ``pending`` (jobs only, dead ones included: no version was
#: ever published), ``current``, ``retired`` or ``erased`` (its latest published version's
#: state).
SOURCE_STATES = ("pending", "current", "retired", "erased")
#: The states a job listing may be filtered by (``cancelled`` matches no job until jobs can
#: be cancelled).
JOB_STATES = ("pending", "leased", "completed", "dead", "cancelled")


@dataclass(frozen=True, slots=True)
class Page:
    """Where a listing page starts: strictly after ``(at, key)`` in the listing's newest-first
    order (``at`` µs: a source's ``changed_at``, a job's ``created_at``; ``key`` the 16-byte
    id), at most ``limit`` rows."""

    limit: int
    after: tuple[int, bytes] | None = None


@dataclass(frozen=True, slots=True)
class SourceFilter:
    """``GET /v1/sources`` filters: ``prefix`` the name starts with (compared by UTF-8
    bytes), ``format``, ``state`` (one of :data:`SOURCE_STATES`); ``principals``: only
    the sources whose ACL admits one of them (:mod:`telha.domain.acl`; ``None``: all)."""

    prefix: str | None = None
    format: str | None = None
    state: str | None = None
    principals: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class JobFilter:
    """``GET /v1/ingest`` filters: ``state`` (one of :data:`JOB_STATES`), ``kind``
    (``ingest:<format>`` or ``erase``), ``source_id``, ``parent`` (the job whose completion
    enqueued the listed ones); ``principals``: only the jobs of sources whose ACL admits
    one of them (:mod:`telha.domain.acl`; ``None``: all)."""

    state: str | None = None
    kind: str | None = None
    source_id: bytes | None = None
    parent: bytes | None = None
    principals: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """One source as listed: ``state`` ``pending`` (jobs only), ``current``, ``retired`` or
    ``erased``; its latest published version's tx (µs, ``None`` when none was ever
    published) and how many it has; its last job and that job's state now; when it last
    changed (µs: a job enqueued, a version published, retired or erased)."""

    source_id: bytes
    name: str
    format: str
    state: str
    latest_tx: int | None
    version_count: int
    last_job_id: bytes | None
    last_job_state: str | None
    changed_at: int


@dataclass(frozen=True, slots=True)
class JobSummary:
    """One job as listed (``created_at``/``updated_at`` µs; ``attempts`` failed attempts, as
    the job row counts them; ``name`` the source's name)."""

    job_id: bytes
    kind: str
    state: str
    source_id: bytes
    name: str | None
    attempts: int
    created_at: int
    updated_at: int
    failure_reason: str | None
    parent_job_id: bytes | None


@dataclass(frozen=True, slots=True)
class JobFamily:
    """A job's parent (``None`` for a job a client enqueued) and its children counted by
    state (``{state: count}``, states without children absent)."""

    parent_job_id: bytes | None
    children: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VersionParent:
    """What enqueued the job that wrote a child source's version (an e-mail's attachment,
    an archive's member): the parent ``job_id``; the parent's ``source_id`` and ``name``
    (``None`` once retention removed a parent job that wrote no version); ``tx``, the
    version that parent job wrote (``None`` when it wrote none, e.g. deduplicated)."""

    job_id: bytes
    source_id: bytes | None
    name: str | None
    tx: int | None


def encode_cursor(kind: bytes, at: int, key: bytes) -> str:
    """The opaque ``nextCursor`` of a page whose last row is ``(at, key)``: one byte naming
    the listing (``kind``), ``at`` as a signed 64-bit big-endian integer, the 16-byte id, in
    URL-safe base64 without padding."""
    raw = kind + at.to_bytes(8, "big", signed=True) + key
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def cursor_bytes(value: str) -> bytes:
    """The bytes an opaque cursor (URL-safe base64, padding dropped) carries; ``b""`` when
    ``value`` is not such base64 (the caller's length check then refuses it)."""
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return b""


def decode_cursor(kind: bytes, value: str | None) -> tuple[int, bytes] | None:
    """The ``(at, key)`` a ``cursor`` of listing ``kind`` carries (``None`` when absent).

    :raises RequestError: not a cursor this service returned for this listing.
    """
    if value is None:
        return None
    raw = cursor_bytes(value)
    if len(raw) != 25 or raw[:1] != kind:
        raise RequestError("cursor is not one this service returned for this listing")
    return int.from_bytes(raw[1:9], "big", signed=True), raw[9:]
