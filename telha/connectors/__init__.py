"""Connectors at run time (docs/connectors.md): the
:class:`~telha.connectors.scheduler.ConnectorScheduler` actor, which starts the scheduled
runs, and the allowed-roots check a ``folder`` or ``slack-export`` connector is held to when
it is added (:mod:`telha.connectors.roots`). The pure rules (kinds, settings, item ids) are
:mod:`telha.domain.connectors`; the runs' jobs and pages are :mod:`telha.ingest.sync_runs`
and :mod:`telha.storage`. Not the connector worker (the top-level ``connectors`` package
under ``workers/``), which imports nothing from ``telha``."""
