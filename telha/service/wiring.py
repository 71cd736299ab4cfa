"""``telha serve``: the supervisor task group that owns every actor (docs/architecture.md,
"Actors and channels"; each actor lives in its feature's package, this module wires them).

Start order is Store → JobQueue → webhook Deliverer → retention collector → search indexer →
Eraser → connector scheduler → (Ingestor and gRPC servicer, plain objects) → worker pools →
gRPC front → REST front. SIGTERM/SIGINT sets the shutdown event, the REST front stops
accepting and drains for ``server.shutdown_grace_s``, then the rest is cancelled in reverse
order and the store closes after its last transaction. Exit 0.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import anyio
import anyio.abc
import structlog

from telha.config import Config, ConfigError
from telha.connectors.scheduler import ConnectorScheduler
from telha.erasure.eraser import Eraser
from telha.grpc.front import GrpcFront
from telha.grpc.servicer import WorkerServicer
from telha.ingest.ingestor import Ingestor
from telha.ingest.projections import Projections
from telha.ingest.request import KNOWN_FORMATS
from telha.ingest.sync_runs import SyncRuns
from telha.metrics import Metrics
from telha.queue.job_queue import JobQueue
from telha.rest.app import create_app
from telha.rest.server import RestFront
from telha.rest.state import AppState
from telha.retention.collector import Retention
from telha.search.indexer import SearchIndexer
from telha.service.debug_memory import debug_gauges
from telha.service.supervisor import Supervisor
from telha.storage import open_store
from telha.tokens import load_token_key
from telha.webhooks.deliverer import Deliverer
from telha.worker_pools import WorkerPools, load_worker_modules
from workers_common.destinations import bare_entries

__all__ = ["run_service", "serve"]

log = structlog.get_logger("telha.serve")


async def _watch_signals(signals: AsyncIterator[int], shutdown: anyio.Event) -> None:
    """First SIGTERM/SIGINT starts the graceful shutdown; later ones are logged, not fatal,
    so a repeated signal cannot cut the drain (and its last transaction) short."""
    async for signum in signals:
        name = signal.Signals(signum).name
        if shutdown.is_set():
            log.info("shutdown_in_progress", signal=name)
            continue
        log.info("shutdown_requested", signal=name)
        shutdown.set()


async def _wait_rest_drained(fronts: anyio.abc.TaskGroup, rest: RestFront, grace_s: float) -> None:
    """Give the REST front ``grace_s`` to finish in-flight requests, then cancel the fronts
    and pools (pools release their held jobs on the way out)."""
    with anyio.move_on_after(grace_s + 1):
        await rest.drained.wait()
    fronts.cancel_scope.cancel()


def _export_worker_settings(cfg: Config) -> None:
    """Worker modules import nothing from ``telha``: the settings they read (``[docling]``
    limits and models, the ``[web]`` browser) reach in-process workers through the
    environment, under the same ``TELHA_<SECTION>__<KEY>`` names a remote worker is given."""
    for key in ("mem_ceiling_mb", "timeout_s", "max_pages", "artifacts_path"):
        os.environ[f"TELHA_DOCLING__{key.upper()}"] = str(getattr(cfg.docling, key))
    os.environ["TELHA_WEB__CHROMIUM_PATH"] = cfg.web.chromium_path
    os.environ["TELHA_WEB__ALLOWED_HOSTS"] = ",".join(cfg.web.allowed_hosts)
    os.environ["TELHA_WEB__DENY_PRIVATE"] = str(cfg.web.deny_private).lower()
    os.environ["TELHA_WEB__ALLOW_UNSANDBOXED"] = str(cfg.web.allow_unsandboxed).lower()
    os.environ["TELHA_WEB__BROWSER_SYS_NICE"] = str(cfg.web.browser_sys_nice).lower()
    os.environ["TELHA_CONNECTORS__ALLOWED_HOSTS"] = ",".join(cfg.connectors.allowed_hosts)
    os.environ["TELHA_CONNECTORS__DENY_PRIVATE"] = str(cfg.connectors.deny_private).lower()
    os.environ["TELHA_CONNECTORS__ALLOWED_ROOTS"] = json.dumps(cfg.connectors.allowed_roots)
    os.environ["TELHA_CONNECTORS__SECRETS"] = ",".join(cfg.connectors.secrets)
    os.environ["TELHA_OCR__LANGUAGES"] = ",".join(cfg.ocr.languages)
    for key in ("dpi", "min_confidence", "max_pages", "page_timeout_s"):
        os.environ[f"TELHA_OCR__{key.upper()}"] = str(getattr(cfg.ocr, key))


async def _check_web_worker(cfg: Config, modules: dict[str, ModuleType]) -> None:
    """The in-process web worker's start checks (docs/formats.md, "Web pages"): a warning
    when private addresses are reachable; a config error when its allow-list does not parse
    or Chromium's sandbox is unavailable and ``[web] allow_unsandboxed`` is false.

    :raises ConfigError: the web worker must not start (the message says why).
    """
    web = modules.get("web_worker")
    if web is None:
        return
    if not cfg.web.deny_private:
        log.warning(
            "web_deny_private_off",
            detail="[web] deny_private = false: web jobs may fetch loopback and private"
            " addresses (any key holder can read what this host can reach)",
        )
    problem = await web.startup_problem()
    if problem is not None:
        raise ConfigError("web", problem)


def _warn_bare_entries(cfg: Config) -> None:
    """One ``allowed_hosts_any_port`` warning per ``allowed_hosts`` entry of ``[web]``,
    ``[webhooks]`` or ``[connectors]`` that names a host or address without a port: it
    admits every port of it (docs/operations.md, "Webhooks"; docs/formats.md, "Web pages:
    destinations")."""
    for section, hosts in (
        ("web", cfg.web.allowed_hosts),
        ("webhooks", cfg.webhooks.allowed_hosts),
        ("connectors", cfg.connectors.allowed_hosts),
    ):
        for entry in bare_entries(hosts):
            spelled = f"[{entry}]" if ":" in entry and not entry.startswith("[") else entry
            log.warning(
                "allowed_hosts_any_port",
                key=f"{section}.allowed_hosts",
                entry=entry,
                detail=f"{entry!r} admits every port of it; list it as"
                f" '{spelled}:<port>' to admit one port only",
            )


async def serve(cfg: Config, base_dir: Path, shutdown: anyio.Event | None = None) -> None:
    """Run the service until SIGTERM/SIGINT (or ``shutdown`` is set): :func:`run_service`
    with the signal handlers ``telha serve`` installs.

    :raises ConfigError: a ``workers.in_process`` module cannot be loaded.
    :raises telha.domain.errors.StorageError: the database cannot be opened or migrated.
    :raises OSError: a listen address cannot be bound.
    :raises telha.service.supervisor.CrashLoop: an actor kept crashing.
    """
    await run_service(cfg, base_dir, shutdown or anyio.Event(), listen_signals=True)


async def run_service(
    cfg: Config,
    base_dir: Path,
    shutdown: anyio.Event,
    *,
    listen_signals: bool = False,
    task_status: anyio.abc.TaskStatus[tuple[str, str]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The one wiring of every actor (docs/architecture.md), shared by ``telha serve`` and
    the in-process test server: run until ``shutdown`` is set, then drain and stop.

    Started with ``task_group.start``, it reports ``(rest_addr, grpc_addr)`` (``host:port``
    strings, the bound addresses) once the service is ready, when it also logs ``ready``.
    ``listen_signals``: SIGTERM/SIGINT set ``shutdown`` (main thread only; ``telha serve``).

    :raises ConfigError: a ``workers.in_process`` module cannot be loaded.
    :raises telha.domain.errors.StorageError: the database cannot be opened or migrated.
    :raises OSError: a listen address cannot be bound.
    :raises telha.service.supervisor.CrashLoop: an actor kept crashing.
    """
    log.info("starting", engine=cfg.storage.engine, pid=os.getpid())
    _export_worker_settings(cfg)
    try:
        modules = load_worker_modules(cfg.workers.in_process)
    except ValueError as exc:
        raise ConfigError("workers.in_process", str(exc)) from None
    await _check_web_worker(cfg, modules)
    _warn_bare_entries(cfg)
    if listen_signals:
        # The receiver stays open until every actor has stopped: a signal during the final
        # close is absorbed, never the default "terminate now".
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            await _serve(cfg, base_dir, modules, shutdown, signals, task_status)
    else:
        await _serve(cfg, base_dir, modules, shutdown, None, task_status)
    log.info("stopped")


def _remove_partial_uploads(folder: Path) -> None:
    """Uploads a crash cut short (their requests never answered): nothing references them."""
    for path in folder.glob("upload-*"):
        path.unlink(missing_ok=True)
        log.warning("partial_upload_removed", path=str(path))


async def _serve(
    cfg: Config,
    base_dir: Path,
    modules: dict[str, ModuleType],
    shutdown: anyio.Event,
    signals: AsyncIterator[int] | None,
    task_status: anyio.abc.TaskStatus[tuple[str, str]],
) -> None:
    async with anyio.create_task_group() as tg:
        if signals is not None:
            tg.start_soon(_watch_signals, signals, shutdown)
        sup = Supervisor(tg)
        store = open_store(cfg, base_dir)
        await sup.start("store", store.run)
        metrics = Metrics()
        metrics.watch_channels(store.channel_statistics)
        metrics.watch_gauge(
            "telha_storage_writer_waiting",
            "Write transactions queued behind the one the SQLite writer runs",
            store.writers_waiting,
        )
        for name, doc, read in debug_gauges():  # TELHA_DEBUG_MEMORY=1 only (bench/soak.py)
            metrics.watch_gauge(name, doc, read)
        queue = JobQueue(store, cfg.jobs, metrics=metrics)
        await sup.start("job_queue", queue.run)
        projections = Projections(KNOWN_FORMATS)
        projections.declare_modules(modules)  # docs/architecture.md, "Dedup, identity …"
        ingestor = Ingestor(store, cfg.ingest, queue, cfg.webhooks, projections)
        deliverer = await sup.start(
            "deliverer", Deliverer(store.webhooks, cfg.webhooks, metrics).run
        )
        metrics.watch_gauge(
            "telha_webhook_oldest_undelivered_seconds",
            "Age of the oldest webhook delivery not yet made (0: none), as of the last look",
            deliverer.oldest_age_s,
        )
        await sup.start("retention", Retention(store, cfg.jobs, metrics).run)
        indexer = await sup.start(
            "search_indexer",
            SearchIndexer(
                store,
                settle_s=cfg.search.settle_ms / 1000,
                max_defer_s=cfg.search.max_defer_ms / 1000,
                metrics=metrics,
            ).run,
        )
        metrics.watch_gauge(
            "telha_search_queued_versions",
            "Versions whose full-text index rows wait to be written or deleted (last look)",
            indexer.queued_versions,
        )
        # A failpoint for the crash tests only: pause an erasure after this step.
        pause = os.environ.get("TELHA_FAILPOINT_ERASE_PAUSE_AFTER") or None
        eraser = await sup.start("eraser", Eraser(store, queue, pause_after=pause).run)
        sync_runs = SyncRuns(store.connectors, queue)
        await sup.start("connector_scheduler", ConnectorScheduler(store.connectors, sync_runs).run)
        servicer = WorkerServicer(queue, ingestor, store.raw, sync_runs)
        try:
            token_key = load_token_key(cfg.grpc.token_key, cfg.storage_path(base_dir).parent)
        except ValueError as exc:
            raise ConfigError("grpc.token_key", str(exc)) from None
        upload_dir = cfg.storage_path(base_dir).parent / "uploads"
        await anyio.to_thread.run_sync(_remove_partial_uploads, upload_dir)
        state = AppState(
            config=cfg,
            store=store,
            ingestor=ingestor,
            queue=queue,
            eraser=eraser,
            metrics=metrics,
            upload_dir=upload_dir,
            shutdown=shutdown,
            token_key=token_key,
            sync_runs=sync_runs,
        )
        metrics.watch_gauge(
            "telha_ingest_in_progress",
            "POST /v1/ingest requests being handled (at most ingest.max_concurrent)",
            lambda: state.ingest_slots.in_use,
        )
        rest = RestFront(
            create_app(state), cfg.server.rest_addr, cfg.server.shutdown_grace_s, shutdown
        )
        async with anyio.create_task_group() as fronts:
            pools = WorkerPools(
                modules,
                cfg.workers.concurrency,
                servicer,
                queue,
                cfg.jobs.lease_secs,
                processes=cfg.workers.processes,
            )
            workers = await Supervisor(fronts).start("worker_pools", pools.run)
            grpc = GrpcFront(servicer, cfg.server.grpc_addr, token_key)
            grpc_addr = await Supervisor(fronts).start("grpc", grpc.run)
            rest_addr = await Supervisor(fronts).start("rest", rest.run)
            state.ready = True
            log.info(
                "ready",
                rest_addr=rest_addr,
                grpc_addr=grpc_addr,
                engine=cfg.storage.engine,
                db=store.location,
                in_process_workers=len(workers),
            )
            task_status.started((str(rest_addr), str(grpc_addr)))
            await shutdown.wait()
            state.ready = False
            # REST drains on its own (hypercorn's grace); then stop taking work.
            await _wait_rest_drained(fronts, rest, cfg.server.shutdown_grace_s)
        tg.cancel_scope.cancel()
