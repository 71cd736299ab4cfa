"""Wire shapes of the connector routes (docs/connectors.md, "REST"): camelCase JSON, shared
by the REST front and the client."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "ConnectorList",
    "ConnectorOut",
    "ConnectorRemovedOut",
    "ConnectorSourceOut",
    "FailedItemOut",
    "RunList",
    "RunOut",
    "RunStartedOut",
]


class _Out(msgspec.Struct, rename="camel", kw_only=True):
    pass


class ConnectorOut(_Out):
    """A registered connector: ``every`` its schedule in seconds (``null``: runs only when
    started); ``createdAt`` µs."""

    connector_id: str
    kind: str
    settings: dict[str, Any]
    every: int | None
    prune_max_fraction: float
    created_at: int


class ConnectorList(_Out):
    """``GET /v1/connectors``: the scope's connectors, oldest first."""

    connectors: list[ConnectorOut]


class ConnectorRemovedOut(_Out):
    """``DELETE /v1/connectors/{id}``: removed at ``removedAt`` (µs); its sources stay."""

    connector_id: str
    removed: bool
    removed_at: int


class ConnectorSourceOut(_Out):
    """``GET /v1/sources?connector=ID&externalId=X``: the source the connector's item names,
    its latest version's projection root (``rootNodeId``, ``null`` before one is
    published), the item's ACL as stored (``null``: none) and whether the connector retired
    it."""

    connector_id: str
    external_id: str
    source_id: str
    name: str
    state: str
    latest_version_tx: int | None
    root_node_id: str | None
    acl: list[str] | None
    retired: bool


class RunStartedOut(_Out):
    """``POST /v1/connectors/{id}/runs``: the run (a ``sync:<kind>`` job) enqueued."""

    run_id: str
    connector_id: str
    status_url: str


class FailedItemOut(_Out):
    """An item a run listed but could not read (never retired for it)."""

    external_id: str
    reason: str


class RunOut(_Out):
    """One run of ``GET /v1/connectors/{id}/runs``: its job's ``state`` and times (µs);
    the counts (``listed``, ``added``, ``changed``, ``unchanged``, ``retired``, ``failed``)
    — so far while it runs (``null`` until its first page), final once it completed —
    whether the listing was ``complete`` (``null`` while it runs), the prune guard's
    ``warning`` and the listing's ``error``; ``children`` its item jobs counted by state
    (the progress of their ingestion); ``failureReason`` of a run that failed."""

    run_id: str
    state: str
    created_at: int
    updated_at: int
    listed: int | None = None
    added: int | None = None
    changed: int | None = None
    unchanged: int | None = None
    retired: int | None = None
    failed: int | None = None
    complete: bool | None = None
    warning: str | None = None
    error: str | None = None
    failure_reason: str | None = None
    children: dict[str, int] = {}
    failed_items: list[FailedItemOut] = []


class RunList(_Out):
    """``GET /v1/connectors/{id}/runs``: the connector's runs, newest first."""

    runs: list[RunOut]
