"""Wire shapes of the connector routes (docs/connectors.md, "REST"): camelCase JSON, shared
by the REST front and the client."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["ConnectorList", "ConnectorOut", "ConnectorRemovedOut", "ConnectorSourceOut"]


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
