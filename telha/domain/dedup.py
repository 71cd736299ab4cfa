"""A version's identity and the one dedup rule (docs/architecture.md, "Dedup, identity and
versions").

A version is identified by its raw bytes (``content_hash``) and by how they were read: its
*projection fingerprint*, BLAKE3 over its identity — the worker, its projection version, the
parser versions that shape its output, the format and the effective options with defaults
filled in, as canonical JSON (:func:`workers_common.projection.identity_json`). Every dedup
decision — the JSON bypass and the upload's early check in the Ingestor, request-level dedup
in :func:`telha.storage.jobs.lifecycle.enqueue` (PostgreSQL's fast path: ``telha_enqueue`` in
``telha/storage/postgres/functions.sql``, the same comparison in SQL, which says so) and the
commit's (:func:`telha.domain.records.is_duplicate`) — asks :func:`same_identity`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from telha.domain.ids import content_hash
from workers_common.projection import ProjectionSpec, effective_options, identity_json

__all__ = [
    "REASONS",
    "Identity",
    "Latest",
    "identity_of",
    "same_identity",
    "version_reason",
]

#: Why a version superseded the one before it (``reason`` on ``GET /v1/sources/{id}``):
#: other bytes; the same bytes read with other effective options; the same bytes and options
#: read by another worker, projection version or parser version; the same identity again
#: after its source was retired.
REASONS = ("content", "options", "projection", "restored")


@dataclass(frozen=True, slots=True)
class Identity:
    """How a version's bytes were read: ``fingerprint`` (32 bytes, BLAKE3 of ``json``) and
    ``json``, its canonical identity JSON (UTF-8)."""

    fingerprint: bytes
    json: bytes


def identity_of(spec: ProjectionSpec, fmt: str, options: Mapping[str, Any]) -> Identity:
    """The identity of reading ``fmt`` bytes with ``spec`` and the request's ``options``
    (effective options: defaults filled, ``null`` and core's own options dropped)."""
    doc = identity_json(spec, fmt, effective_options(fmt, options))
    return Identity(content_hash(doc), doc)


class Latest(NamedTuple):
    """What dedup compares with: a source's latest published version."""

    content_hash: bytes
    canonical_hash: bytes | None
    job_id: bytes | None
    fingerprint: bytes | None = None
    identity: bytes | None = None
    retired: bool = False
    erased: bool = False
    #: The version's tx (µs), when the reader selected it.
    tx: int | None = None


def same_identity(latest: Latest | None, digest: bytes, fingerprint: bytes | None) -> bool:
    """The dedup rule: ``digest`` read as ``fingerprint`` is the source's latest version
    already — the same bytes and the same fingerprint, and the version neither retired (the
    same bytes after a retire make a new version) nor erased (an erased digest is refused,
    never matched). Versions from before fingerprints (``None``) match only a request that
    has none either."""
    return (
        latest is not None
        and not latest.retired
        and not latest.erased
        and latest.content_hash == digest
        and latest.fingerprint == fingerprint
    )


def version_reason(previous: Latest | None, digest: bytes, identity: bytes | None) -> str | None:
    """Why a new version with ``digest`` and ``identity`` supersedes ``previous`` (the
    source's latest published version, retired or not): ``None`` for a first version, else
    one of :data:`REASONS`. Other bytes are ``content``; the same bytes with other effective
    options ``options``; with the same options but another worker, projection, parser
    version or format (or a version from before identities) ``projection``."""
    if previous is None:
        return None
    if previous.content_hash != digest:
        return "content"
    if previous.identity == identity:
        return "restored"
    if previous.identity is None or identity is None:
        return "projection"
    old = msgspec.json.decode(previous.identity)
    new = msgspec.json.decode(identity)
    if old.get("options") != new.get("options"):
        return "options"
    return "projection"
