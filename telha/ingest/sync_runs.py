"""Starting and ending sync runs (docs/connectors.md, "Sync runs").

:meth:`SyncRuns.start` enqueues a ``sync:<kind>`` job whose inline content is the run's
spec (the connector's settings and the checkpoint of the last complete run — no item
markers: core compares them page by page); a connector worker leases it over
``WorkerService`` like any job and submits its report as streamed pages
(:class:`telha.domain.sync_runs.SyncPage`). :meth:`SyncRuns.apply` turns each page into one
transaction (:func:`telha.storage.connectors.sync_pages.apply_page`): the items read become child
jobs of the run at once, the answer names the listed items to read next, the run's counts
so far are its job's ``stats``; the last page retires what a complete listing no longer
holds, under the rules of docs/connectors.md ("Deletions"), and completes the run.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from typing import Any

import msgspec
import structlog

from telha.domain.connectors import (
    ConnectorItem,
    ConnectorRecord,
    check_acl,
    check_external_id,
    connector_source_id,
)
from telha.domain.errors import Conflict, RequestError
from telha.domain.ids import content_hash, id_str, new_id, now_us
from telha.domain.model import JobRecord, LeaseRef, NewJob, Scope
from telha.domain.submission import InvalidSubmission
from telha.domain.sync_runs import SyncPage, decode_page
from telha.ingest.ingestor import IngestJobPayload, SubmitResult, new_ingest_job
from telha.ingest.request import FETCH_FORMATS, KNOWN_FORMATS, check_request
from telha.offload import off_loop
from telha.queue.job_queue import JobQueue
from telha.storage.api import PageApply
from telha.storage.protocol import ConnectorStore

__all__ = ["SyncRuns", "checkpoint_of", "run_spec"]

log = structlog.get_logger("telha.sync")


def run_spec(job: JobRecord) -> dict[str, Any]:
    """The spec a run job carries (its inline content): ``connectorId``, ``kind``,
    ``settings``, ``checkpoint``, ``confirmPrune``."""
    payload = msgspec.json.decode(job.payload, type=IngestJobPayload)
    spec: dict[str, Any] = json.loads(base64.b64decode(payload.content_b64))
    return spec


def checkpoint_of(stats: bytes | None) -> str | None:
    """The checkpoint a completed run's stats kept (``None``: none)."""
    if stats is None:
        return None
    value = json.loads(stats).get("checkpoint")
    return value if isinstance(value, str) else None


class SyncRuns:
    """Starts runs (REST) and applies their reports (gRPC ``SubmitIngestionResult``).

    :param connectors: the store's connector aggregate (``store.connectors``).
    :param queue: the job queue (wake-ups, failures, metrics).
    """

    def __init__(self, connectors: ConnectorStore, queue: JobQueue) -> None:
        self._connectors = connectors
        self._queue = queue

    async def start(
        self, scope: Scope, connector: ConnectorRecord, *, confirm_prune: bool
    ) -> bytes:
        """Enqueue a run of ``connector``; its job id (the run id).

        :raises Conflict: a run of this connector is pending or running.
        """
        run_id = await self._start(scope, connector, confirm_prune, None)
        if run_id is None:
            raise Conflict("a run of this connector is pending or running")
        return run_id

    async def start_scheduled(self, scope: Scope, connector: ConnectorRecord) -> bytes | None:
        """Start a run of a connector with a schedule if it is due: none pending or running
        and none started in the last ``every`` seconds (checked in the start's transaction);
        its id, else ``None``."""
        assert connector.every_s is not None
        return await self._start(scope, connector, False, connector.every_s * 1_000_000)

    async def _start(
        self, scope: Scope, connector: ConnectorRecord, confirm_prune: bool, every_us: int | None
    ) -> bytes | None:
        checkpoint = None
        for run in await self._connectors.sync_runs(scope, connector.connector_id, limit=20):
            if run.state == "completed" and (found := checkpoint_of(run.stats)) is not None:
                checkpoint = found
                break
        spec = {
            "connectorId": id_str(connector.connector_id),
            "kind": connector.kind,
            "scope": f"{scope.tenant_id}/{scope.organization_id}",
            "settings": connector.settings,
            "checkpoint": checkpoint,
            "confirmPrune": confirm_prune,
        }
        raw = json.dumps(spec).encode()
        fmt = f"sync:{connector.kind}"
        payload = IngestJobPayload(
            source_id=id_str(connector.connector_id), format=fmt,
            name=f"connector:{id_str(connector.connector_id)}",
            content_b64=base64.b64encode(raw).decode(), content_hash=None, size=len(raw),
            options={},
        )  # fmt: skip
        job = NewJob(new_id(), fmt, fmt, connector.connector_id, None, msgspec.json.encode(payload))
        run_id = await self._connectors.start_sync_run(
            scope, job, now_us=now_us(), every_us=every_us
        )
        if run_id is None:
            return None
        self._queue.notify(fmt)
        log.info("sync_run_started", connector_id=spec["connectorId"], run_id=id_str(run_id))
        return run_id

    async def apply(
        self, job: JobRecord, lease: LeaseRef, result_json: bytes, worker: str
    ) -> SubmitResult:
        """Apply one page of a run's report (one transaction; the last one retires and
        completes the run), or end the run ``invalid_submission`` for a page core cannot
        use (that page writes nothing; earlier pages' items stay; nothing is retired). The
        answer's ``node_ids`` are the page's listed external ids whose bytes core wants.

        :raises StaleLease: the caller does not hold the run.
        :raises OutOfSync: a page out of sequence.
        """
        try:
            page = await off_loop(len(result_json), decode_page, result_json)
            spec = run_spec(job)
            cid = uuid.UUID(spec["connectorId"]).bytes
            connector = await self._connectors.get(job.scope, cid)
            if connector is None:
                raise InvalidSubmission("the run's connector was removed")
            children = await off_loop(
                len(result_json), _children, job.scope, spec["connectorId"], page
            )
        except InvalidSubmission as exc:
            await self._queue.fail(lease, "invalid_submission", str(exc), log_detail=True)
            self._queue.metrics.invalid_submissions.labels(job.kind).inc()
            return SubmitResult(False, reason=str(exc))
        t0 = time.perf_counter()
        outcome = await self._connectors.apply_sync_page(
            PageApply(
                job.scope, lease, cid, page, children, connector.prune_max_fraction,
                bool(spec.get("confirmPrune")), worker, now_us(), self._queue.lease_us,
            )
        )  # fmt: skip
        log.info(
            "sync_page_applied", seq=page.seq, listed=len(page.listed), read=len(children),
            removed=len(page.removed), failed=len(page.failed), wanted=len(outcome.wanted),
            replay=outcome.replay, apply_ms=round((time.perf_counter() - t0) * 1000, 1),
        )  # fmt: skip
        for name in outcome.refused:
            log.warning("child_refused_erased", child=name)
        for fmt in {job.format for job, _ in children}:
            self._queue.notify(fmt)
        if not outcome.finished:
            return SubmitResult(
                True, wanted=tuple(outcome.wanted), lease_deadline=outcome.lease_deadline,
                replay=outcome.replay,
            )  # fmt: skip
        self._queue.finished(job.job_id)
        self._queue.transition(job.kind, "completed")
        p = outcome.progress
        log.info(
            "sync_run_completed", listed=p.listed, added=p.added, changed=p.changed,
            unchanged=p.unchanged, retired=p.retired, failed=p.failed, complete=p.complete,
            warning=p.warning,
        )  # fmt: skip
        return SubmitResult(True)


def _children(
    scope: Scope, connector_id: str, page: SyncPage
) -> tuple[tuple[NewJob, ConnectorItem], ...]:
    """The child jobs and item rows of a page's items (pure, in a thread: it decodes their
    bytes).

    :raises InvalidSubmission: a bad external id, format, name, ACL or base64.
    """
    for entry in page.listed:
        _checked_id(entry.external_id)
    for ext in page.removed:
        _checked_id(ext)
    return tuple(_child(scope, connector_id, item) for item in page.items)


def _checked_id(external_id: str) -> str:
    try:
        return check_external_id(external_id)
    except RequestError as exc:
        raise InvalidSubmission(f"external id {external_id[:100]!r}: {exc.message}") from None


def _child(scope: Scope, connector_id: str, item: Any) -> tuple[NewJob, ConnectorItem]:
    """The child job and the item row of one new or changed item.

    :raises InvalidSubmission: a bad external id, format, name, ACL or base64.
    """
    try:
        ext = check_external_id(item.external_id)
        acl = check_acl(item.acl)
        fmt = item.format
        if fmt not in KNOWN_FORMATS or fmt in FETCH_FORMATS or fmt == "json":
            raise RequestError(f"format {item.format!r} cannot be a connector item's")
        check_request(item.format, item.name, {})
        raw = base64.b64decode(item.content_b64, validate=True)
    except RequestError as exc:
        raise InvalidSubmission(f"items: {item.external_id!r}: {exc.message}") from None
    except (binascii.Error, ValueError):
        raise InvalidSubmission(f"items: {item.external_id!r}: contentB64 is not base64") from None
    source_id = connector_source_id(connector_id, scope.tenant_id, ext)
    job = new_ingest_job(item.format, item.name, raw, content_hash(raw), {}, source_id=source_id)
    row = ConnectorItem(
        uuid.UUID(connector_id).bytes, ext, source_id.bytes, item.name, marker=item.marker,
        modified_us=item.modified_us, size=len(raw), acl=acl, updated_at=now_us(),
    )  # fmt: skip
    return job, row
