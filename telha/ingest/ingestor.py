"""The Ingestor (docs/architecture.md): request-level dedup, the synchronous JSON bypass, job
enqueueing for worker formats, and ``apply_submission`` for what workers submit.
"""

from __future__ import annotations

import functools
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import anyio
import msgspec
import structlog

from telha.config import IngestConfig, WebhooksConfig
from telha.domain.canonical import is_label, upper_snake
from telha.domain.dedup import Identity, Latest, identity_of, same_identity
from telha.domain.erasure import BLOCKED_REASON, ERASED_MESSAGE
from telha.domain.errors import ContentErased, InvalidStream, PayloadTooLarge, RequestError
from telha.domain.ids import content_hash, now_us, source_id_for
from telha.domain.model import (
    Dedup,
    JobCompletion,
    JobRecord,
    LeaseRef,
    NewJob,
    NewVersion,
    Scope,
    SourceVersion,
    StreamPart,
    WebhookTarget,
)
from telha.domain.submission import (
    InvalidSubmission,
    Submission,
    decode_submission,
    to_projection,
)
from telha.domain.webhooks import split_webhook_option
from telha.ingest.job_payload import IngestJobPayload, content_ref
from telha.ingest.job_payload import child_jobs as _child_jobs
from telha.ingest.job_payload import decode_payload as _decode_payload
from telha.ingest.job_payload import new_job as _new_job
from telha.ingest.job_payload import with_root_id as _with_root_id
from telha.ingest.json_ids import AUTO, OFF, IdRule
from telha.ingest.json_projection import (
    JsonOptions,
    empty_projection,
    is_empty_json,
    project_json,
)
from telha.ingest.projections import JSON_SPEC, Projections
from telha.ingest.request import FETCH_FORMATS, KNOWN_FORMATS, IngestRequest
from telha.logs import fields_of
from telha.offload import off_loop
from telha.queue.job_queue import JobQueue
from telha.storage.protocol import RawStore, VersionStore, WebhookStore
from workers_common.projection import ProjectionSpec

__all__ = [
    "IngestJobPayload",
    "IngestResult",
    "IngestStore",
    "Ingestor",
    "SubmitResult",
    "UploadedFile",
    "as_latest",
    "content_ref",
    "new_ingest_job",
]

log = structlog.get_logger("telha.ingest")

#: ``SourceVersion.worker`` of versions written by the JSON bypass (docs/rest-api.md).
JSON_BYPASS_WORKER = "core:json-bypass"
_JSON_OPTIONS = frozenset({"label", "nested", "id_key"})
#: Scopes remembered to have a webhook signing secret, at most (then forgotten at once).
_SECRET_CACHE = 10_000


@dataclass(frozen=True, slots=True)
class IngestResult:
    """Outcome of one ingest: deduplicated (nothing written; ``job_id`` of an active job
    covering the same bytes, if any), applied (json: the 201 body fields) or enqueued
    (``job_id`` of the new job)."""

    deduplicated: bool
    source_id: uuid.UUID
    source_version_tx: int | None = None
    node_ids: tuple[bytes, ...] = ()
    edge_ids: tuple[bytes, ...] = ()
    job_id: bytes | None = None
    #: A ``format=json`` version's stats (``{"empty": true}`` for an empty input), else ``None``.
    stats: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class UploadedFile:
    """Raw bytes received to a file: ``size`` bytes at ``path`` with BLAKE3 ``digest``."""

    path: Path
    digest: bytes
    size: int


@dataclass(frozen=True, slots=True)
class SubmitResult:
    """What ``SubmitIngestionResult`` answers: accepted (node ids in submission order) or
    refused as ``invalid_submission`` with the reason."""

    accepted: bool
    node_ids: tuple[bytes, ...] = ()
    deduplicated: bool = False
    reason: str | None = None
    #: For an accepted partial: the extended lease deadline (µs).
    lease_deadline: int = 0
    #: A repeated last seq answered from the checkpoint, nothing written.
    replay: bool = False
    #: A sync run's page: the listed external ids whose bytes core wants, answered in
    #: ``node_ids`` (docs/connectors.md, "Sync runs").
    wanted: tuple[str, ...] = ()


class IngestStore(Protocol):
    """The storage roles the Ingestor writes through: source versions and raw uploads (and
    reads: a scope's webhook signing secret)."""

    @property
    def raw(self) -> RawStore:
        """The store's raw upload aggregate."""

    @property
    def versions(self) -> VersionStore:
        """The store's version aggregate."""

    @property
    def webhooks(self) -> WebhookStore:
        """The store's webhook aggregate (a scope's signing secret)."""


class Ingestor:
    """Single entry point of ``POST /v1/ingest`` and of worker submissions.

    :param store: the storage engine.
    :param config: the ``[ingest]`` section (limits and the default nesting policy).
    :param queue: the job queue worker formats are enqueued on.
    :param webhooks: the ``[webhooks]`` section (where an ``options.webhook`` may point).
    """

    def __init__(
        self,
        store: IngestStore,
        config: IngestConfig,
        queue: JobQueue,
        webhooks: WebhooksConfig | None = None,
        projections: Projections | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._queue = queue
        hooks = webhooks or WebhooksConfig()
        self._webhook_rules = hooks.rules()
        self._have_secret: set[Scope] = set()
        self.projections = projections or Projections(KNOWN_FORMATS)

    async def identity(
        self, scope: Scope, fmt: str, source_id: bytes, options: dict[str, Any]
    ) -> tuple[Identity, Latest | None]:
        """The identity a request of ``fmt`` with ``options`` expects now
        (:meth:`telha.ingest.projections.Projections.spec_for`), and, when it had to be read
        for that (no worker declared ``fmt`` yet), the source's latest version."""
        spec = self.projections.spec(fmt)
        latest = None
        if spec is None:
            latest = as_latest(await self._store.versions.latest(scope, source_id))
            spec = self.projections.spec_for(fmt, latest.identity if latest else None)
        return identity_of(spec, fmt, options), latest

    def json_options(self, name: str, options: dict[str, Any]) -> JsonOptions:
        """Resolve ``options`` of a ``format=json`` request (``label``, ``nested``,
        ``id_key``: docs/formats.md, "JSON records").

        :raises RequestError: unknown option, non-string or non-UPPER_SNAKE label, a name with
            nothing to derive a label from, a nesting policy other than flatten/child, an
            ``id_key`` other than a non-empty string, ``true`` or ``false``.
        """
        if "webhook" in options:
            raise RequestError(
                "options.webhook: format=json is applied at once and makes no job; there is"
                " no job end to notify"
            )
        unknown = sorted(set(options) - _JSON_OPTIONS)
        if unknown:
            raise RequestError(
                f"unknown option(s) for format=json: {', '.join(unknown)};"
                f" accepted: {', '.join(sorted(_JSON_OPTIONS))}"
            )
        label = options.get("label")
        if label is None:
            label = upper_snake(name)
            if not label:
                raise RequestError(f"cannot derive a label from name {name!r}; set options.label")
        elif not isinstance(label, str) or not is_label(label):
            raise RequestError("options.label must be an UPPER_SNAKE string such as RISK")
        nested = options.get("nested")
        if nested is None:
            nested = self._config.json_nested
        if nested not in ("flatten", "child"):
            raise RequestError('options.nested must be "flatten" or "child"')
        id_key = options.get("id_key")
        if id_key is None or id_key is False:
            ids = OFF
        elif id_key is True:
            ids = AUTO
        elif isinstance(id_key, str) and id_key:
            ids = IdRule((id_key,), strict=True)
        else:
            raise RequestError(
                "options.id_key must name a top-level key of every record (a non-empty"
                " string), be true (id, else _id, where usable) or false (records matched by"
                " content, the default)"
            )
        return JsonOptions(
            label=label,
            nested=cast(Literal["flatten", "child"], nested),
            max_records=self._config.json_max_records,
            max_depth=self._config.json_max_depth,
            max_nodes=self._config.json_max_nodes,
            ids=ids,
        )

    async def ingest(
        self, scope: Scope, req: IngestRequest, *, max_pending: int = 0
    ) -> IngestResult:
        """Ingest one validated request: ``json`` is applied now, every other format becomes
        an ``ingest:{format}`` job (request-level dedup except for ``web``). ``max_pending``
        (> 0): the scope's ``max_pending_jobs``, held in the enqueue's transaction.

        :raises RequestError: bad options.
        :raises ContentError: content the JSON projection rejects; nothing is written.
        :raises QuotaExceeded: the scope has ``max_pending`` pending jobs; nothing is written.
        """
        if req.format != "json":
            return await self._enqueue(scope, req, max_pending)
        return await self._json_bypass(scope, req)

    async def ingest_upload(
        self,
        scope: Scope,
        fmt: str,
        name: str,
        options: dict[str, Any],
        upload: UploadedFile,
        *,
        max_pending: int = 0,
    ) -> IngestResult:
        """Ingest a multipart upload already on disk: request-level dedup against the latest
        version first (nothing stored for a re-upload of the same bytes), then the raw bytes
        stored content-addressed and an ``ingest:{fmt}`` job referencing them (``content_ref``)
        — the job's dedup runs again in the enqueue transaction. ``json`` is projected as a
        JSON body is, so it is held to ``ingest.max_body_bytes``. ``max_pending``: as in
        :meth:`ingest`.

        :raises PayloadTooLarge: a ``json`` upload over ``ingest.max_body_bytes``.
        :raises RequestError: a fetch format (``web``) with a file, bad options.
        :raises ContentError: JSON content the projection rejects.
        :raises QuotaExceeded: refused by ``max_pending``; the raw bytes stay stored, named
            by no job, until retention removes them.
        """
        if fmt == "json":
            if upload.size > self._config.max_body_bytes:
                raise PayloadTooLarge(
                    "format=json is projected in memory: at most ingest.max_body_bytes"
                    f" ({self._config.max_body_bytes} bytes)"
                )
            raw = await anyio.to_thread.run_sync(upload.path.read_bytes)
            return await self._json_bypass(scope, IngestRequest(fmt, name, raw, options))
        if fmt in FETCH_FORMATS:
            raise RequestError(f"format={fmt} fetches its content from the name; send no file")
        options, webhook = await self._webhook(scope, options)
        source_id = source_id_for(name)
        ident, latest = await self.identity(scope, fmt, source_id.bytes, options)
        if latest is None:
            latest = as_latest(await self._store.versions.latest(scope, source_id.bytes))
        if same_identity(latest, upload.digest, ident.fingerprint):
            return IngestResult(True, source_id)
        await self._store.raw.put(scope, upload.digest, upload.path, upload.size)
        job = _new_job(fmt, name, b"", upload.digest, options, stored=True, size=upload.size)
        job = replace(job, webhook=webhook, fingerprint=ident.fingerprint)
        outcome = await self._queue.enqueue(scope, job, dedup=True, max_pending=max_pending)
        if outcome.erased:
            raise ContentErased(ERASED_MESSAGE)
        if not outcome.deduplicated:
            log.info("enqueued", **fields_of(job, scope), bytes=upload.size, stored=True)
        return IngestResult(outcome.deduplicated, source_id, job_id=outcome.job_id)

    async def _webhook(
        self, scope: Scope, options: dict[str, Any]
    ) -> tuple[dict[str, Any], WebhookTarget | None]:
        """``options`` without ``webhook`` and its target; a target needs the scope's signing
        secret (docs/operations.md, "Webhooks").

        :raises RequestError: a bad ``options.webhook``, or a scope without a secret.
        """
        options, target = split_webhook_option(options, self._webhook_rules)
        if target is None or scope in self._have_secret:
            return options, target
        # A secret is rotated, never removed: once seen it is remembered.
        if await self._store.webhooks.has_secret(scope):
            if len(self._have_secret) >= _SECRET_CACHE:
                self._have_secret.clear()
            self._have_secret.add(scope)
        else:
            raise RequestError(
                "options.webhook: this scope has no webhook signing secret yet; make one with"
                " `telha webhook secret --tenant … --org …`"
            )
        return options, target

    async def _enqueue(self, scope: Scope, req: IngestRequest, max_pending: int) -> IngestResult:
        source_id = req.source_id or source_id_for(req.name)
        options, webhook = await self._webhook(scope, req.options)
        raw = req.raw or b""
        digest = await off_loop(len(raw), content_hash, raw) if req.raw is not None else None
        job = await off_loop(
            len(raw), functools.partial(_new_job, source_id=source_id),
            req.format, req.name, raw, digest, options,
        )  # fmt: skip
        ident, _ = await self.identity(scope, req.format, source_id.bytes, options)
        job = replace(job, webhook=webhook, fingerprint=ident.fingerprint)
        dedup = req.format not in FETCH_FORMATS
        outcome = await self._queue.enqueue(scope, job, dedup=dedup, max_pending=max_pending)
        if outcome.erased:
            raise ContentErased(ERASED_MESSAGE)
        if not outcome.deduplicated:
            log.debug("enqueued", **fields_of(job, scope), bytes=len(raw))
        return IngestResult(outcome.deduplicated, source_id, job_id=outcome.job_id)

    async def _json_bypass(self, scope: Scope, req: IngestRequest) -> IngestResult:
        assert req.raw is not None
        opts = self.json_options(req.name, req.options)
        source_id = req.source_id or source_id_for(req.name)
        digest = await off_loop(len(req.raw), content_hash, req.raw)
        ident = identity_of(JSON_SPEC, "json", _json_identity_options(opts, req.options))
        latest = as_latest(await self._store.versions.latest(scope, source_id.bytes))
        if same_identity(latest, digest, ident.fingerprint):
            return IngestResult(True, source_id)
        t0 = time.perf_counter()
        empty = is_empty_json(req.raw)
        if empty:  # docs/formats.md, "Empty input": the root node alone, stats.empty
            projection = empty_projection(req.name)
        else:
            project = functools.partial(project_json, source_id=source_id.bytes)
            projection = await anyio.to_thread.run_sync(project, req.raw, opts)
        t1 = time.perf_counter()
        version = NewVersion(
            source_id=source_id.bytes,
            name=req.name,
            format=req.format,
            content_hash=digest,
            size=len(req.raw),
            worker=JSON_BYPASS_WORKER,
            fingerprint=ident.fingerprint,
            identity=ident.json,
        )
        outcome = await self._store.versions.commit(scope, version, projection, dedup=Dedup.CONTENT)
        t2 = time.perf_counter()
        if outcome.deduplicated:
            return IngestResult(True, source_id)
        log.info(
            "ingested",
            source_id=str(source_id),
            tenant_id=scope.tenant_id,
            organization_id=scope.organization_id,
            tx=outcome.source_version_tx,
            format=req.format,
            bytes=len(req.raw),
            nodes=len(outcome.node_ids),
            edges=len(outcome.edge_ids),
            project_ms=round((t1 - t0) * 1000, 1),
            commit_ms=round((t2 - t1) * 1000, 1),
        )
        return IngestResult(
            False,
            source_id,
            outcome.source_version_tx,
            tuple(outcome.node_ids),
            tuple(outcome.edge_ids),
            stats={"empty": True} if empty else None,
        )

    async def apply_submission(
        self, job: JobRecord, lease: LeaseRef, result_json: bytes, worker: str
    ) -> SubmitResult:
        """Apply a worker's submission: single shot or one part of a stream
        (docs/architecture.md, "Streaming").

        Validated before anything is written; an invalid submission writes nothing and
        dead-letters the job as ``invalid_submission``. Each submission commits in one
        transaction (a single shot or final part with the job's completion and children).

        :raises telha.domain.errors.StaleLease: the caller does not hold ``job`` under ``lease``.
        :raises telha.domain.errors.OutOfSync: a streamed part out of sequence (gRPC ``ABORTED``).
        """
        try:
            t0 = time.perf_counter()
            sub = await off_loop(len(result_json), decode_submission, result_json)
            t1 = time.perf_counter()
            streamed = sub.partial or sub.seq != 0
            base = (
                await self._store.versions.stream_base(job.job_id, lease, worker) if streamed else 0
            )
            projection = await off_loop(len(result_json), to_projection, sub, base)
            t2 = time.perf_counter()
            # The payload embeds the raw content (base64) and children may carry theirs:
            # decoding and hashing them is work for a thread when they are large.
            payload = await off_loop(len(job.payload), _decode_payload, job.payload)
            if payload.root_node_id and not streamed:
                # A stream's root may come in any part: streaming workers place the id.
                projection = _with_root_id(projection, payload.root_node_id)
            if sub.partial and sub.child_jobs:
                raise InvalidSubmission("childJobs belong in the final submission of a stream")
            children = await off_loop(len(result_json), _child_jobs, sub.child_jobs)
            children = tuple(self._expect(child) for child in children)
            version = self._identified(_version(job, payload, sub, worker), payload, sub)
            stats = msgspec.json.encode(sub.stats) if sub.stats is not None else None
            now = now_us()
            if not streamed:
                completion = JobCompletion(lease, now, stats, children, worker)
                outcome = await self._store.versions.commit(
                    job.scope, version, projection, dedup=Dedup.SUBMIT, completion=completion
                )
                if outcome.erased:
                    return self._refused_erased(job)
                self._log_refused(outcome.refused_children)
                result = SubmitResult(True, tuple(outcome.node_ids), outcome.deduplicated)
                self._queue.metrics.submission_applied(
                    job.kind, partial=False, replay=False, deduplicated=outcome.deduplicated,
                    canonical_bytes=len(projection.canonical), stats=sub.stats,
                )  # fmt: skip
            else:
                part = StreamPart(
                    lease, worker, sub.seq, sub.partial, base, now, self._queue.lease_us,
                    version.content_hash if sub.content_hash else None, stats, children,
                )  # fmt: skip
                streamed_outcome = await self._store.versions.apply_stream_part(
                    job.scope, version, projection, part
                )
                if streamed_outcome.erased:
                    return self._refused_erased(job)
                self._log_refused(streamed_outcome.refused_children)
                self._queue.metrics.submission_applied(
                    job.kind, partial=sub.partial, replay=streamed_outcome.replay,
                    deduplicated=False, canonical_bytes=len(projection.canonical),
                    stats=sub.stats,
                )  # fmt: skip
                log.info(
                    "partial_applied",
                    seq=sub.seq,
                    nodes=len(streamed_outcome.node_ids),
                    bytes=len(projection.canonical),
                    replay=streamed_outcome.replay,
                    decode_ms=round((t1 - t0) * 1000, 1),
                    validate_ms=round((t2 - t1) * 1000, 1),
                    apply_ms=round((time.perf_counter() - t2) * 1000, 1),
                )
                result = SubmitResult(
                    True,
                    tuple(streamed_outcome.node_ids),
                    lease_deadline=streamed_outcome.lease_deadline,
                    replay=streamed_outcome.replay,
                )
                if sub.partial:
                    return result
        except (InvalidSubmission, InvalidStream) as exc:
            reason = str(exc)
            # Logged once, by the queue, with core's reason.
            await self._queue.fail(lease, "invalid_submission", reason, log_detail=True)
            self._queue.metrics.invalid_submissions.labels(job.kind).inc()
            return SubmitResult(False, reason=reason)
        self._queue.finished(job.job_id)
        self._queue.transition(job.kind, "completed")
        for fmt in {c.format for c in children}:
            self._queue.notify(fmt)
        log.info(
            "job_completed",
            deduplicated=result.deduplicated,
            nodes=len(result.node_ids),
            children=len(children),
        )
        return result

    def _expect(self, child: NewJob) -> NewJob:
        """A child job with the fingerprint its format's declared worker would use (none
        declared: one that matches no version, so the child is read)."""
        options = msgspec.json.decode(child.payload, type=_Options).options
        spec = self.projections.spec_for(child.format, None)
        return replace(child, fingerprint=identity_of(spec, child.format, options).fingerprint)

    def _identified(
        self, version: NewVersion, payload: IngestJobPayload, sub: Submission
    ) -> NewVersion:
        """``version`` with the identity its worker read the bytes with: the submission's
        ``projection`` (which also declares it for the format), else the format's declared
        spec (docs/architecture.md, "Dedup, identity and versions")."""
        declared = sub.projection
        if declared is not None:
            spec = ProjectionSpec(declared.worker, declared.version, declared.parsers)
            self.projections.declare(payload.format, spec)
        else:
            spec = self.projections.spec_for(payload.format, None)
        ident = identity_of(spec, payload.format, payload.options)
        return replace(version, fingerprint=ident.fingerprint, identity=ident.json)

    def _refused_erased(self, job: JobRecord) -> SubmitResult:
        """A submission whose content is blocklisted: the store ended the job ``dead``
        (``erased``) and wrote nothing else."""
        self._queue.finished(job.job_id)
        self._queue.transition(job.kind, "dead")
        log.warning("submission_refused_erased")
        return SubmitResult(False, reason=BLOCKED_REASON)

    @staticmethod
    def _log_refused(names: tuple[str, ...]) -> None:
        for name in names:
            log.warning("child_refused_erased", child=name)


def _version(job: JobRecord, payload: IngestJobPayload, sub: Submission, worker: str) -> NewVersion:
    """The version a submission writes. ``contentHash`` is what a fetch-format worker fetched
    (required there); for every other format the raw bytes' hash stands, and a different
    one is refused (a worker may not rewrite content identity)."""
    if payload.format in FETCH_FORMATS:
        if not sub.content_hash and not sub.partial:  # the single shot or a stream's final part
            raise InvalidSubmission(f"contentHash is required for format {payload.format!r}")
        reported = sub.content_hash or payload.content_hash
    else:
        if sub.content_hash and sub.content_hash != payload.content_hash:
            raise InvalidSubmission("contentHash differs from the hash of the job's raw bytes")
        reported = payload.content_hash
    return NewVersion(
        source_id=job.source_id,
        name=payload.name,
        format=payload.format,
        content_hash=bytes.fromhex(reported) if reported else content_hash(b""),
        size=payload.size,
        worker=worker,
        job_id=job.job_id,
    )


class _Options(msgspec.Struct):
    """A job payload's options alone (the rest, base64 content included, is skipped)."""

    options: dict[str, Any] = {}


def _json_identity_options(opts: JsonOptions, options: dict[str, Any]) -> dict[str, Any]:
    """The effective options of a ``format=json`` version's identity: the resolved ``label``
    and ``nested``, and ``id_key`` as given (absent: the default rule, which reads the same
    bytes differently from a named key, so a change between them is a new version)."""
    resolved: dict[str, Any] = {"label": opts.label, "nested": opts.nested}
    if options.get("id_key") is not None:
        resolved["id_key"] = options["id_key"]
    return resolved


def as_latest(v: SourceVersion | None) -> Latest | None:
    """A read latest version as dedup compares it (:func:`telha.domain.dedup.same_identity`).
    An erased latest version never matches: its digest is on the blocklist, and the write
    that follows refuses it inside its own transaction (``ContentErased``: 410)."""
    if v is None:
        return None
    return Latest(
        v.content_hash, v.canonical_text_hash, v.job_id, v.fingerprint, v.identity,
        v.retired_tx is not None, v.erased_at is not None,
    )  # fmt: skip


def new_ingest_job(
    fmt: str,
    name: str,
    raw: bytes,
    digest: bytes | None,
    options: dict[str, Any],
    *,
    source_id: uuid.UUID | None = None,
) -> NewJob:
    """An ``ingest:{fmt}`` job of ``raw`` inline, for ``source_id`` (a connector item's, a
    sync run's child) or the name's (:func:`telha.ingest.job_payload.new_job`)."""
    return _new_job(fmt, name, raw, digest, options, source_id=source_id)
