"""The sync run routes (docs/connectors.md, "Sync runs"): ``POST /v1/connectors/{id}/runs``
starts a run, ``GET /v1/connectors/{id}/runs`` lists them with their counts."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import NotFound, RequestError, Unavailable
from telha.domain.ids import id_str
from telha.rest.access import require_scope
from telha.rest.body import read_body
from telha.rest.openapi_parts import BODY_TIMEOUT, CONNECTOR, ERRORS, SECURED, answer, param
from telha.rest.params import parse_int, parse_uuid
from telha.rest.responses import json_response
from telha.rest.state import state
from telha.storage.api import RunRow
from telha.wire.connectors import FailedItemOut, RunList, RunOut, RunStartedOut

__all__ = ["openapi_paths", "routes"]


async def start_run(request: Request) -> Response:
    """POST /v1/connectors/{connectorId}/runs ``{"confirmPrune": bool}`` (body optional):
    202 with the run's id.

    :raises NotFound: no such connector in the scope.
    :raises Conflict: a run of it is pending or running.
    :raises RequestError: a body that is not ``{"confirmPrune": bool}``.
    """
    scope = await require_scope(request)
    st = state(request)
    connector_id = parse_uuid(request.path_params["connector_id"], "connector")
    raw = await read_body(request, 4096)
    confirm = False
    if raw.strip():
        try:
            body = json.loads(raw)
        except ValueError:
            raise RequestError("request body: not JSON") from None
        if not isinstance(body, dict) or set(body) - {"confirmPrune"}:
            raise RequestError('request body: {"confirmPrune": true|false} or nothing')
        confirm = body.get("confirmPrune", False)
        if not isinstance(confirm, bool):
            raise RequestError("confirmPrune: true or false")
    connector = await st.store.connectors.get(scope, connector_id)
    if connector is None:
        raise NotFound("no such connector")
    if st.sync_runs is None:
        raise Unavailable("this server runs no sync runs")
    run_id = await st.sync_runs.start(scope, connector, confirm_prune=confirm)
    cid = id_str(connector_id)
    return json_response(
        RunStartedOut(run_id=id_str(run_id), connector_id=cid,
                      status_url=f"/v1/connectors/{cid}/runs"),
        202,
    )  # fmt: skip


def _run_out(r: RunRow, children: dict[str, int]) -> RunOut:
    out = RunOut(
        run_id=id_str(r.run_id), state=r.state, created_at=r.created_at,
        updated_at=r.updated_at, failure_reason=r.failure_reason, children=children,
    )  # fmt: skip
    if r.stats is None:
        return out
    s = json.loads(r.stats)
    for name in ("listed", "added", "changed", "unchanged", "retired", "failed"):
        setattr(out, name, s.get(name))
    out.complete = s.get("complete")
    out.warning = s.get("warning")
    out.error = s.get("error")
    out.failed_items = [
        FailedItemOut(external_id=f["externalId"], reason=f["reason"])
        for f in s.get("failedItems", [])
    ]
    return out


async def list_runs(request: Request) -> Response:
    """GET /v1/connectors/{connectorId}/runs?limit= (default 20, at most 100): the
    connector's runs, newest first, with their counts and their item jobs by state.

    :raises NotFound: no such connector in the scope.
    """
    scope = await require_scope(request)
    st = state(request)
    connector_id = parse_uuid(request.path_params["connector_id"], "connector")
    limit = parse_int(request.query_params.get("limit"), "limit", minimum=1) or 20
    if limit > 100:
        raise RequestError("limit must be at most 100")
    if await st.store.connectors.get(scope, connector_id) is None:
        raise NotFound("no such connector")
    runs = []
    for r in await st.store.connectors.sync_runs(scope, connector_id, limit=limit):
        family = await st.store.listings.job_family(scope, r.run_id)
        runs.append(_run_out(r, family.children if family is not None else {}))
    return json_response(RunList(runs=runs))


routes = [
    Route("/v1/connectors/{connector_id}/runs", start_run, methods=["POST"]),
    Route("/v1/connectors/{connector_id}/runs", list_runs, methods=["GET"]),
]


#: The ``POST /v1/connectors/{connectorId}/runs`` body, described.
_RUN_BODY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"confirmPrune": {"type": "boolean"}},
}


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    conflict = answer("ErrorBody", "CONFLICT: a run of this connector is pending or running")
    return {
        "/v1/connectors/{connectorId}/runs": {
            "post": {
                "summary": "Start a sync run",
                "security": SECURED,
                "parameters": [CONNECTOR],
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _RUN_BODY}},
                },
                "responses": {
                    "202": answer("RunStartedOut", "the run enqueued"),
                    "408": BODY_TIMEOUT,
                    "409": conflict,
                    "503": answer("ErrorBody", "UNAVAILABLE: this server runs no sync runs"),
                    **ERRORS,
                },
            },
            "get": {
                "summary": "The connector's runs, newest first, with their counts",
                "security": SECURED,
                "parameters": [
                    CONNECTOR,
                    param(
                        "limit",
                        "query",
                        {"type": "integer", "minimum": 1, "maximum": 100},
                        "runs (20)",
                    ),
                ],
                "responses": {"200": answer("RunList", "the runs"), **ERRORS},
            },
        },
    }
