"""``telha serve``: the supervisor task group that owns every actor (DESIGN.md §1).

Start order is Store → Ingestor → REST front; SIGTERM/SIGINT sets the shutdown event, the
REST front stops accepting and drains for ``server.shutdown_grace_s``, then the rest is
cancelled in reverse order and the store closes after its last transaction. Exit 0.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.abc
import structlog

from telha.config import Config
from telha.ingest.ingestor import Ingestor
from telha.rest.app import AppState, create_app
from telha.rest.server import RestFront
from telha.storage.sqlite import SqliteStore
from telha.supervisor import Supervisor

__all__ = ["serve"]

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


async def serve(cfg: Config, base_dir: Path, shutdown: anyio.Event | None = None) -> None:
    """Run the service until SIGTERM/SIGINT (or ``shutdown`` is set).

    :raises telha.errors.StorageError: the database cannot be opened or migrated.
    :raises OSError: a listen address cannot be bound.
    :raises telha.supervisor.CrashLoop: an actor kept crashing.
    """
    shutdown = shutdown or anyio.Event()
    # The receiver stays open until every actor has stopped: a signal during the final
    # close is absorbed, never the default "terminate now".
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        await _serve(cfg, base_dir, shutdown, signals)
    log.info("stopped")


async def _serve(
    cfg: Config, base_dir: Path, shutdown: anyio.Event, signals: AsyncIterator[int]
) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, signals, shutdown)
        sup = Supervisor(tg)
        store = SqliteStore(
            cfg.storage_path(base_dir),
            synchronous=cfg.storage.synchronous,
            readers=cfg.storage.readers,
        )
        await sup.start("store", store.run)
        ingestor = Ingestor(store, cfg.ingest)
        state = AppState(config=cfg, store=store, ingestor=ingestor)
        rest = RestFront(
            create_app(state), cfg.server.rest_addr, cfg.server.shutdown_grace_s, shutdown
        )
        async with anyio.create_task_group() as fronts:
            rest_addr = await Supervisor(fronts).start("rest", rest.run)
            state.ready = True
            log.info("ready", rest_addr=rest_addr, db=str(store.path))
            await shutdown.wait()
            state.ready = False
        tg.cancel_scope.cancel()
