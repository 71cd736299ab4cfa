"""What changed between versions, and retiring a source (docs/rest-api.md, "Versions and
diffs"): ``GET /v1/sources/{sourceId}/diff`` and ``DELETE /v1/sources/{sourceId}``."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import RequestError
from telha.domain.ids import id_str
from telha.rest.access import require_access, require_admitted
from telha.rest.body import read_body
from telha.rest.offsets import units_param
from telha.rest.openapi_parts import (
    BODY_TIMEOUT,
    CONFLICT,
    CURSOR,
    ERASED,
    ERRORS,
    INT,
    LIMIT,
    SECURED,
    SOURCE,
    UNITS_PARAM,
    answer,
    param,
)
from telha.rest.params import (
    MAX_REASON_CHARS,
    decode_body,
    encode_node_cursor,
    parse_int,
    parse_node_cursor,
    parse_uuid,
)
from telha.rest.responses import json_response
from telha.rest.shapes import node_out
from telha.rest.state import state
from telha.wire import DiffOut, NodeChangeOut, RetiredOut, RetireOut

__all__ = ["openapi_paths", "parse_retire_reason", "routes"]

_MAX_LIMIT = 1000
_DEFAULT_LIMIT = 100
_MAX_BODY_BYTES = 16 * 1024


async def source_diff(request: Request) -> Response:
    """GET /v1/sources/{sourceId}/diff?from=&to=&limit=&cursor=&units= — one page of what
    changed from version ``from`` to version ``to`` (defaults: the version before ``to``,
    and the latest), paged by node id like ``/v1/nodes``; provenance offsets in ``units``."""
    access = await require_access(request)
    scope = access.scope
    source_id = parse_uuid(request.path_params["source_id"], "source")
    q = request.query_params
    from_tx = parse_int(q.get("from"), "from")
    to_tx = parse_int(q.get("to"), "to")
    if from_tx is not None and to_tx is not None and from_tx >= to_tx:
        raise RequestError(f"from ({from_tx}) must be before to ({to_tx})")
    limit = parse_int(q.get("limit"), "limit", minimum=1) or _DEFAULT_LIMIT
    if limit > _MAX_LIMIT:
        raise RequestError(f"limit must be <= {_MAX_LIMIT}")
    units = units_param(request)
    await require_admitted(request, access, source_id)
    store = state(request).store
    diff = await store.reads.diff(
        scope, source_id, from_tx=from_tx, to_tx=to_tx, limit=limit,
        after=parse_node_cursor(q.get("cursor")),
    )  # fmt: skip
    pairs = [n for pair in diff.changed for n in pair]
    out = await node_out(store.reads, scope, [*diff.added, *diff.removed, *pairs], units)
    added = out[: len(diff.added)]
    removed = out[len(diff.added) : len(diff.added) + len(diff.removed)]
    rest = out[len(diff.added) + len(diff.removed) :]
    changed = [NodeChangeOut(before=b, after=a) for b, a in zip(rest[::2], rest[1::2], strict=True)]
    return json_response(
        DiffOut(
            from_=diff.from_tx,
            to=diff.to_tx,
            added=added,
            removed=removed,
            changed=changed,
            unchanged=diff.unchanged,
            next_cursor=encode_node_cursor(diff.next_after) if diff.next_after else None,
        )
    )


class _RetireBody(msgspec.Struct, forbid_unknown_fields=True):
    """The optional JSON body of a retire."""

    reason: str | None = None


def parse_retire_reason(query: str | None, body: bytes) -> str | None:
    """The retire's ``reason``: the query parameter or the JSON body's ``reason`` (an empty
    body: none), not both.

    :raises RequestError: a body that is not ``{"reason": string|null}``, a reason in both
        places, an empty or whitespace-only reason, one over the erase reason's limit.
    """
    from_body = None
    if body.strip():
        from_body = decode_body(body, _RetireBody, "retire request").reason
    if query is not None and from_body is not None:
        raise RequestError("give reason as a query parameter or in the body, not both")
    reason = query if query is not None else from_body
    if reason is None:
        return None
    if not reason.strip():
        raise RequestError("reason must not be empty")
    if len(reason) > MAX_REASON_CHARS:
        raise RequestError(f"reason is over {MAX_REASON_CHARS} characters")
    return reason


async def retire_source(request: Request) -> Response:
    """DELETE /v1/sources/{sourceId}?reason= (or a ``{"reason"}`` body) — retire the
    source: its graph leaves the current one, bytes and history stay. Retiring again
    answers the first retire."""
    access = await require_access(request)
    scope = access.scope
    source_id = parse_uuid(request.path_params["source_id"], "source")
    body = await read_body(request, _MAX_BODY_BYTES)
    reason = parse_retire_reason(request.query_params.get("reason"), body)
    await require_admitted(request, access, source_id)
    done = await state(request).store.versions.retire(scope, source_id, reason)
    return json_response(
        RetireOut(
            source_id=id_str(done.source_id),
            retired=RetiredOut(tx=done.tx, reason=done.reason),
            version_tx=done.version_tx,
            nodes_closed=done.nodes_closed,
        )
    )


routes = [
    Route("/v1/sources/{source_id}/diff", source_diff, methods=["GET"]),
    Route("/v1/sources/{source_id}", retire_source, methods=["DELETE"]),
]


_RETIRE_BODY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "reason": {
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": 1000,
            "description": "why (kept with the retire); or the reason query parameter",
        },
    },
}


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/sources/{sourceId}": {
            "delete": {
                "summary": "Retire a source: its graph leaves the current one, history stays",
                "description": (
                    "Closes, at a new transaction time, every node and edge only this source"
                    " supports (a node another source's edge touches keeps a version with"
                    " that source's spans) and marks the current version retired. Reads"
                    " asOf an earlier time still show it; bytes, text and spans stay (this"
                    " is not erasure). Ingesting the same bytes again creates a new version."
                    " Retiring again answers the first retire. The reason goes as a query"
                    " parameter or in a JSON body, not both."
                ),
                "security": SECURED,
                "parameters": [
                    SOURCE,
                    param(
                        "reason",
                        "query",
                        {"type": "string", "minLength": 1, "maxLength": 1000},
                        "why (optional)",
                    ),
                ],
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _RETIRE_BODY}},
                },
                "responses": {
                    "200": answer("RetireOut", "the retire (the first one's, when retired again)"),
                    "409": CONFLICT,
                    "408": BODY_TIMEOUT,
                    **ERRORS,
                },
            },
        },
        "/v1/sources/{sourceId}/diff": {
            "get": {
                "summary": "What changed between two versions of a source, paged by node id",
                "description": (
                    "added: nodes of `to` whose ids `from` has not; removed: nodes of `from`"
                    " whose ids `to` has not; changed: ids in both with other labels or"
                    " properties (before: the `from` row, after: the `to` row); unchanged:"
                    " how many ids are in both, equal (the whole diff, on every page). A"
                    " page lists at most `limit` nodes across the three lists."
                ),
                "security": SECURED,
                "parameters": [
                    SOURCE,
                    param(
                        "from",
                        "query",
                        INT,
                        "a version's transaction time, µs (default: the version before `to`;"
                        " none when `to` is the first: every node is added)",
                    ),
                    param(
                        "to",
                        "query",
                        INT,
                        "a version's transaction time, µs, after `from` (default: the latest)",
                    ),
                    LIMIT,
                    CURSOR,
                    UNITS_PARAM,
                ],
                "responses": {
                    "200": answer("DiffOut", "a page of the diff"),
                    "410": ERASED,
                    **ERRORS,
                },
            },
        },
    }
