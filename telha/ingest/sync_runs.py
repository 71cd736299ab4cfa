"""Starting and ending sync runs (docs/connectors.md, "Sync runs").

:meth:`SyncRuns.start` enqueues a ``sync:<kind>`` job whose inline content is the run's
spec (the connector's settings, the change marker of each live item, the checkpoint of the
last complete run); a connector worker leases it over ``WorkerService`` like any job and
submits a report (:class:`telha.domain.sync_runs.SyncReport`). :meth:`SyncRuns.apply` turns
the report into one transaction (:func:`telha.storage.core.sync_runs.apply_run`): the new
and changed items become child jobs of the run, gone items are retired by the rules of
:func:`telha.domain.sync_runs.plan_retire`, and the run completes with its counts.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
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
from telha.domain.model import JobCompletion, JobRecord, LeaseRef, NewJob, Scope
from telha.domain.submission import InvalidSubmission
from telha.domain.sync_runs import SyncReport, decode_report, plan_retire
from telha.ingest.ingestor import IngestJobPayload, SubmitResult, new_ingest_job
from telha.ingest.request import FETCH_FORMATS, KNOWN_FORMATS, check_request
from telha.offload import off_loop
from telha.queue.job_queue import JobQueue
from telha.storage.core.sync_runs import RunApply
from telha.storage.protocol_connectors import ConnectorStore

__all__ = ["SyncRuns", "checkpoint_of", "run_spec"]

log = structlog.get_logger("telha.sync")

#: Failed items a run's stats name (the count is always exact).
_FAILED_SHOWN = 100


def run_spec(job: JobRecord) -> dict[str, Any]:
    """The spec a run job carries (its inline content): ``connectorId``, ``kind``,
    ``settings``, ``known`` ({external id: marker}), ``checkpoint``, ``confirmPrune``."""
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

    :param store: the connector role of the store.
    :param queue: the job queue (wake-ups, failures, metrics).
    """

    def __init__(self, store: ConnectorStore, queue: JobQueue) -> None:
        self._store = store
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
        known = await self._store.known_markers(scope, connector.connector_id)
        checkpoint = None
        for run in await self._store.sync_runs(scope, connector.connector_id, limit=20):
            if run.state == "completed" and (found := checkpoint_of(run.stats)) is not None:
                checkpoint = found
                break
        spec = {
            "connectorId": id_str(connector.connector_id),
            "kind": connector.kind,
            "settings": connector.settings,
            "known": known,
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
        run_id = await self._store.start_sync_run(scope, job, now_us=now_us(), every_us=every_us)
        if run_id is None:
            return None
        self._queue.notify(fmt)
        log.info("sync_run_started", connector_id=spec["connectorId"], run_id=id_str(run_id))
        return run_id

    async def apply(
        self, job: JobRecord, lease: LeaseRef, result_json: bytes, worker: str
    ) -> SubmitResult:
        """Apply a run's report: one transaction, or ``invalid_submission`` (nothing
        written, nothing retired) for a report core cannot use.

        :raises StaleLease: the caller does not hold the run.
        """
        try:
            report = await off_loop(len(result_json), decode_report, result_json)
            spec = run_spec(job)
            cid = uuid.UUID(spec["connectorId"]).bytes
            connector = await self._store.get_connector(job.scope, cid)
            if connector is None:
                raise InvalidSubmission("the run's connector was removed")
            items = await self._store.connector_items(job.scope, cid)
            run = await off_loop(
                len(result_json), functools.partial(_plan, job, lease, worker, connector),
                report, items, bool(spec.get("confirmPrune")),
            )  # fmt: skip
        except InvalidSubmission as exc:
            await self._queue.fail(lease, "invalid_submission", str(exc), log_detail=True)
            self._queue.metrics.invalid_submissions.labels(job.kind).inc()
            return SubmitResult(False, reason=str(exc))
        retired, refused = await self._store.apply_sync_run(run)
        for name in refused:
            log.warning("child_refused_erased", child=name)
        self._queue.finished(job.job_id)
        self._queue.transition(job.kind, "completed")
        for fmt in {c.format for c in run.completion.children}:
            self._queue.notify(fmt)
        log.info("sync_run_completed", children=len(run.completion.children), retired=retired)
        return SubmitResult(True)


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


def _plan(
    job: JobRecord,
    lease: LeaseRef,
    worker: str,
    connector: ConnectorRecord,
    report: SyncReport,
    items: list[ConnectorItem],
    confirm_prune: bool,
) -> RunApply:
    """The transaction a report makes (pure, in a thread: it decodes the items' bytes)."""
    cid = id_str(connector.connector_id)
    live = [i for i in items if i.retired_at is None]
    known = {i.external_id for i in live}
    children, rows, added = [], [], 0
    for item in report.items:
        child, row = _child(job.scope, cid, item)
        children.append(child)
        rows.append(row)
        added += row.external_id not in known
    gone, warning = plan_retire(live, report, connector.prune_max_fraction, confirm_prune)
    listed = (
        len(report.seen) if report.full_listing
        else len(report.items) + report.unchanged + len(report.failed)
    )  # fmt: skip
    stats = {
        "listed": listed, "added": added, "changed": len(rows) - added,
        "unchanged": report.unchanged, "retired": len(gone), "failed": len(report.failed),
        "complete": report.complete, "warning": warning, "error": report.error,
        "checkpoint": report.checkpoint if report.complete else None,
        "failedItems": [
            {"externalId": f.external_id, "reason": f.reason[:500]}
            for f in report.failed[:_FAILED_SHOWN]
        ],
    }  # fmt: skip
    at = now_us()
    completion = JobCompletion(lease, at, json.dumps(stats).encode(), tuple(children), worker)
    return RunApply(job.scope, tuple(rows), tuple(gone), completion, at)
