"""The connector scheduler (docs/connectors.md, "Schedules"): an actor of ``telha serve``
that starts a run of every connector with a schedule (``every``) once its last run started
``every`` seconds ago or more (or it never ran), unless one is pending or running. The check
is made again inside the start's transaction, so replicas scheduling at once start one run.
"""

from __future__ import annotations

import anyio
import anyio.abc
import structlog

from telha.domain.errors import StorageError
from telha.domain.ids import id_str
from telha.ingest.sync_runs import SyncRuns
from telha.storage.protocol import ConnectorStore

__all__ = ["ConnectorScheduler"]

log = structlog.get_logger("telha.sync")

#: Seconds between the scheduler's passes (a schedule is at least 60 s).
PASS_S = 5.0


class ConnectorScheduler:
    """Starts scheduled runs.

    :param connectors: the store's connector aggregate (``store.connectors``).
    :param runs: starts the runs.
    :param pass_s: seconds between passes.
    """

    def __init__(self, connectors: ConnectorStore, runs: SyncRuns, pass_s: float = PASS_S) -> None:
        self._connectors = connectors
        self._runs = runs
        self._pass_s = pass_s

    async def run(self, *, task_status: anyio.abc.TaskStatus[ConnectorScheduler]) -> None:
        """Actor body: report ``self``, then a pass every ``pass_s`` seconds until
        cancelled; a pass the store failed is logged and tried again at the next."""
        task_status.started(self)
        while True:
            try:
                await self.run_once()
            except StorageError as exc:
                log.warning("connector_schedule_failed", error=exc.message)
            await anyio.sleep(self._pass_s)

    async def run_once(self) -> int:
        """One pass: the runs it started."""
        started = 0
        for scope, connector in await self._connectors.scheduled():
            run_id = await self._runs.start_scheduled(scope, connector)
            if run_id is not None:
                started += 1
                log.info(
                    "sync_run_scheduled",
                    connector_id=id_str(connector.connector_id),
                    run_id=id_str(run_id),
                )
        return started
