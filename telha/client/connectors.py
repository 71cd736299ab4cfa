"""The connector calls of :class:`telha.client.AsyncTelha` (docs/connectors.md, "REST"):
register, list and remove connectors; look a connector's item up by its external id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from telha.client.calls import Calls
from telha.wire.connectors import (
    ConnectorList,
    ConnectorOut,
    ConnectorRemovedOut,
    ConnectorSourceOut,
    RunList,
    RunOut,
    RunStartedOut,
)

__all__ = ["ConnectorCalls"]


class ConnectorCalls(Calls):
    """Connector methods over the client's ``_request`` (a base of :class:`AsyncTelha`)."""

    async def add_connector(
        self,
        kind: str,
        settings: Mapping[str, Any],
        *,
        every: str | int | None = None,
        prune_max_fraction: float | None = None,
    ) -> ConnectorOut:
        """``POST /v1/connectors``: register a connector of ``kind`` with ``settings``, run
        every ``every`` (seconds or ``15m``-style; ``None``: only when started).

        :raises InvalidRequest: an unknown kind, settings the kind refuses, a bad schedule.
        """
        body: dict[str, Any] = {"kind": kind, "settings": dict(settings)}
        if every is not None:
            body["every"] = every
        if prune_max_fraction is not None:
            body["pruneMaxFraction"] = prune_max_fraction
        resp = await self._request("POST", "/v1/connectors", lambda: {"json": body})
        return msgspec.json.decode(resp.content, type=ConnectorOut)

    async def connectors(self) -> list[ConnectorOut]:
        """``GET /v1/connectors``: the scope's connectors, oldest first."""
        return (await self._get("/v1/connectors", ConnectorList)).connectors

    async def connector(self, connector_id: str) -> ConnectorOut:
        """``GET /v1/connectors/{id}``.

        :raises NotFound: no such connector in this scope.
        """
        return await self._get(f"/v1/connectors/{connector_id}", ConnectorOut)

    async def remove_connector(self, connector_id: str) -> ConnectorRemovedOut:
        """``DELETE /v1/connectors/{id}``: its tokens are refused from then on; its sources
        stay.

        :raises NotFound: no such connector in this scope.
        """
        resp = await self._request("DELETE", f"/v1/connectors/{connector_id}")
        return msgspec.json.decode(resp.content, type=ConnectorRemovedOut)

    async def connector_source(self, connector_id: str, external_id: str) -> ConnectorSourceOut:
        """``GET /v1/sources?connector=ID&externalId=X``: the source the item names and its
        ``rootNodeId``.

        :raises NotFound: the connector made no source for that external id.
        """
        params = {"connector": connector_id, "externalId": external_id}
        return await self._get("/v1/sources", ConnectorSourceOut, params)

    async def start_run(self, connector_id: str, *, confirm_prune: bool = False) -> RunStartedOut:
        """``POST /v1/connectors/{id}/runs``: start a sync run; ``confirm_prune`` lets it
        retire more than the connector's ``pruneMaxFraction`` of its sources.

        :raises NotFound: no such connector in this scope.
        :raises Conflict: a run of it is pending or running.
        """
        body = {"confirmPrune": confirm_prune}
        resp = await self._request(
            "POST", f"/v1/connectors/{connector_id}/runs", lambda: {"json": body}
        )
        return msgspec.json.decode(resp.content, type=RunStartedOut)

    async def runs(self, connector_id: str, *, limit: int | None = None) -> list[RunOut]:
        """``GET /v1/connectors/{id}/runs``: its runs, newest first, with their counts.

        :raises NotFound: no such connector in this scope.
        """
        params = {"limit": limit}
        return (await self._get(f"/v1/connectors/{connector_id}/runs", RunList, params)).runs
