"""Re-projection (docs/rest-api.md, "Re-projection"): read the current versions of a scope
again, from their stored raw bytes, when they were made by another projection or other
effective options than a request would use now (docs/architecture.md, "Dedup, identity and
versions").

A current version is *outdated* when the fingerprint a request of its bytes would expect now
(:meth:`telha.ingest.projections.Projections.spec_for` with its job's options) differs from
its own. Each outdated version whose bytes are still stored — inline in its job's payload, or
as a complete raw upload — becomes an ordinary ``ingest:{format}`` job of its scope (enqueued
with request-level dedup, so running re-projection twice makes no second job), worked in the
background like any other: fair leasing gives other scopes their turns meanwhile, and the
job's state is its progress. A version whose bytes are gone (a fetched page, a JSON body, an
upload retention removed) is listed, not failed. Erased and retired sources are never read.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Literal

import msgspec

from telha.domain.dedup import identity_of
from telha.domain.ids import id_str, new_id
from telha.domain.model import NewJob, Scope
from telha.ingest.job_payload import IngestJobPayload, decode_payload
from telha.ingest.projections import Projections, spec_of_identity
from telha.ingest.request import FETCH_FORMATS
from telha.queue.job_queue import JobQueue
from telha.storage.api import ReprojectRow
from telha.storage.protocol import VersionStore

__all__ = ["Outdated", "ReprojectResult", "Reprojector"]

#: Current versions read per page (a payload may carry its raw bytes inline).
_PAGE = 100


@dataclass(frozen=True, slots=True)
class Outdated:
    """One outdated current version: its source, why (``options`` or ``projection``), its
    fingerprint and the one a request would expect now (hex; ``fingerprint`` ``None`` for a
    version from before identities), and the job that reads it again (``None``: a dry run,
    or its bytes are gone)."""

    source_id: str
    name: str
    format: str
    reason: Literal["options", "projection"]
    fingerprint: str | None
    expected: str
    job_id: str | None = None


@dataclass(slots=True)
class ReprojectResult:
    """What a re-projection found: ``outdated`` versions (enqueued unless a dry run),
    ``raw_gone`` (outdated, but their bytes are not stored: listed, not failed) and how many
    current versions are ``up_to_date``."""

    outdated: list[Outdated] = field(default_factory=list)
    raw_gone: list[Outdated] = field(default_factory=list)
    up_to_date: int = 0


class Reprojector:
    """Finds outdated current versions and enqueues their re-projection.

    :param versions: the store's version aggregate (the current versions it walks).
    :param projections: the formats' declared projections (the Ingestor's).
    :param queue: where the jobs go.
    """

    def __init__(self, versions: VersionStore, projections: Projections, queue: JobQueue) -> None:
        self._versions = versions
        self._projections = projections
        self._queue = queue

    async def run(
        self,
        scope: Scope,
        *,
        fmt: str | None = None,
        source_id: bytes | None = None,
        dry_run: bool = False,
    ) -> ReprojectResult:
        """Re-project ``scope``'s outdated current versions (of format ``fmt`` and source
        ``source_id`` when given); with ``dry_run`` only list them. Each job is enqueued in
        its own transaction, so a large run never holds the writer for long."""
        result = ReprojectResult()
        after = b""
        while True:
            rows = await self._versions.current(scope, fmt, source_id, after, _PAGE)
            if not rows:
                return result
            after = rows[-1].source_id
            for row in rows:
                await self._one(scope, row, result, dry_run)

    async def _one(
        self, scope: Scope, row: ReprojectRow, result: ReprojectResult, dry_run: bool
    ) -> None:
        payload = _payload(row)
        options = payload.options if payload is not None else _stored_options(row.identity)
        spec = self._projections.spec_for(row.format, row.identity)
        expected = identity_of(spec, row.format, options)
        if expected.fingerprint == row.fingerprint:
            result.up_to_date += 1
            return
        found = Outdated(
            id_str(row.source_id), row.name, row.format, _reason(row.identity, expected.json),
            row.fingerprint.hex() if row.fingerprint is not None else None,
            expected.fingerprint.hex(),
        )  # fmt: skip
        job = _job(row, payload, options)
        if job is None:
            result.raw_gone.append(found)
            return
        if not dry_run:
            job = replace(job, fingerprint=expected.fingerprint)
            outcome = await self._queue.enqueue(scope, job, dedup=True)
            found = replace(found, job_id=id_str(outcome.job_id) if outcome.job_id else None)
        result.outdated.append(found)


def _payload(row: ReprojectRow) -> IngestJobPayload | None:
    if row.payload is None:
        return None
    try:
        return decode_payload(row.payload)
    except msgspec.DecodeError:  # an erase job's payload, or scrubbed
        return None


def _stored_options(identity: bytes | None) -> dict[str, object]:
    """The effective options a version's identity recorded (none: ``{}``)."""
    if identity is None:
        return {}
    options = msgspec.json.decode(identity).get("options")
    return dict(options) if isinstance(options, dict) else {}


def _reason(identity: bytes | None, expected: bytes) -> Literal["options", "projection"]:
    if identity is None or spec_of_identity(identity) is None:
        return "projection"
    old = msgspec.json.decode(identity)
    new = msgspec.json.decode(expected)
    return "options" if old.get("options") != new.get("options") else "projection"


def _job(
    row: ReprojectRow, payload: IngestJobPayload | None, options: dict[str, object]
) -> NewJob | None:
    """The job that reads ``row``'s bytes again, or ``None`` when they are not stored: a
    fetch format's page, a version without a job whose upload is not stored, a payload whose
    bytes were neither inline nor stored."""
    if row.format in FETCH_FORMATS or row.format == "json":
        return None
    digest = row.content_hash.hex()
    if payload is not None and payload.content_hash == digest and payload.content_b64:
        new = payload  # the bytes and options as the version's job had them
    elif row.raw_stored:
        new = IngestJobPayload(
            source_id=str(uuid.UUID(bytes=row.source_id)), format=row.format, name=row.name,
            content_hash=digest, content_ref=digest, size=row.size, options=dict(options),
            root_node_id=payload.root_node_id if payload is not None else None,
        )  # fmt: skip
    else:
        return None
    return NewJob(
        new_id(), f"ingest:{row.format}", row.format, row.source_id, row.content_hash,
        msgspec.json.encode(new), name=row.name,
    )  # fmt: skip
