"""``POST /v1/sources/{sourceId}/erase`` (docs/operations.md, "Erasure"): GDPR erasure of a
source or one version.

The body is ``{"reason": "...", "versionTx": <µs, optional>}``; the answer (200) says what
was erased (:class:`~telha.wire.ErasureOut`). The erasure runs as an ``erase`` job
(:mod:`telha.erasure.eraser`); its id is the ``erasureId`` and ``GET /v1/ingest/{erasureId}``
shows its steps.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import RequestError
from telha.rest.access import require_access, require_admitted
from telha.rest.body import read_body
from telha.rest.openapi_parts import BODY_TIMEOUT, ERRORS, SECURED, SOURCE, enum, param, ref
from telha.rest.params import MAX_REASON_CHARS, decode_body, parse_choice, parse_uuid
from telha.rest.state import state

__all__ = ["openapi_paths", "routes"]

_MAX_BODY_BYTES = 16 * 1024


class EraseRequest(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """The request body: why (required) and, optionally, which version."""

    reason: str
    version_tx: int | None = None


class _DryRunRequest(EraseRequest, forbid_unknown_fields=True, rename="camel"):
    """A dry run's body: the same, ``reason`` optional."""

    reason: str = ""
    version_tx: int | None = None


def parse_erase_request(body: bytes, *, dry_run: bool = False) -> EraseRequest:
    """The validated body (``dry_run``: ``reason`` may be absent or empty).

    :raises RequestError: not a JSON object of the shape above, an empty or too long
        ``reason``, a ``versionTx`` that is not a non-negative integer.
    """
    req = decode_body(body, _DryRunRequest if dry_run else EraseRequest, "erase request")
    if not dry_run and not req.reason.strip():
        raise RequestError("reason must not be empty")
    if len(req.reason) > MAX_REASON_CHARS:
        raise RequestError(f"reason is over {MAX_REASON_CHARS} characters")
    if req.version_tx is not None and not 0 <= req.version_tx < 2**63:
        raise RequestError("versionTx must be a non-negative 64-bit integer")
    return req


async def erase_source(request: Request) -> Response:
    """POST /v1/sources/{sourceId}/erase — erase for good; 200 with the result (a repeated
    erase of erased versions answers the same result). ``?dryRun=true`` answers what would
    be erased and erases nothing."""
    access = await require_access(request)
    scope = access.scope
    source_id = parse_uuid(request.path_params["source_id"], "source")
    dry_run = parse_choice(request.query_params.get("dryRun"), "dryRun", ("true", "false"))
    body = await read_body(request, _MAX_BODY_BYTES)
    if dry_run == "true":
        # A dry run needs no reason: the body may be empty.
        version_tx = parse_erase_request(body, dry_run=True).version_tx if body.strip() else None
        await require_admitted(request, access, source_id)
        preview = await state(request).eraser.preview(scope, source_id, version_tx)
        return Response(preview, media_type="application/json")
    req = parse_erase_request(body)
    await require_admitted(request, access, source_id)
    principal = f"tenant={scope.tenant_id} organization={scope.organization_id}"
    result = await state(request).eraser.erase(
        scope, source_id, req.version_tx, req.reason, principal
    )
    return Response(result, media_type="application/json")


routes = [Route("/v1/sources/{source_id}/erase", erase_source, methods=["POST"])]


#: The erase request body, described.
_ERASE_BODY = {
    "type": "object",
    "required": ["reason"],
    "additionalProperties": False,
    "properties": {
        "reason": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "description": "why (kept in the erasure audit, with who and when)",
        },
        "versionTx": {
            "type": ["integer", "null"],
            "minimum": 0,
            "description": "erase only this version (transaction time, µs); default every one",
        },
    },
}


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    out = {
        "description": "what was erased, or with dryRun=true what would be",
        "content": {
            "application/json": {"schema": {"oneOf": [ref("ErasureOut"), ref("ErasurePreviewOut")]}}
        },
    }
    return {
        "/v1/sources/{sourceId}/erase": {
            "post": {
                "summary": "Erase a source (every version, or one) for good (GDPR)",
                "description": (
                    "Runs as an erase job (GET /v1/ingest/{erasureId} shows its steps): raw"
                    " bytes and inline job content deleted, canonical text replaced by"
                    " redaction records (length and hash), nodes scrubbed and hidden or"
                    " trimmed, span rows deleted, pending/leased jobs of the source dead"
                    " (erased), both digests of every erased version on the scope's"
                    " blocklist (a later ingest of them answers 410). Versions of other"
                    " sources sharing the bytes or canonical text are erased with it. A"
                    " repeated erase answers the same result. dryRun=true erases nothing and"
                    " answers what would be erased (ErasurePreviewOut: sources with names,"
                    " versions, node counts); its body may be empty and reason is optional."
                ),
                "security": SECURED,
                "parameters": [
                    SOURCE,
                    param(
                        "dryRun",
                        "query",
                        enum(("true", "false")),
                        "true: answer what would be erased (ErasurePreviewOut), erase nothing",
                    ),
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ERASE_BODY}},
                },
                "responses": {"200": out, **ERRORS, "408": BODY_TIMEOUT},
            }
        },
    }
