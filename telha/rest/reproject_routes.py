"""``POST /v1/reproject`` (docs/rest-api.md, "Re-projection"): read the scope's outdated
current versions again from their stored raw bytes (:mod:`telha.ingest.reproject`)."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import Forbidden, RequestError
from telha.ingest.reproject import Outdated, Reprojector
from telha.ingest.request import KNOWN_FORMATS
from telha.rest.access import require_access
from telha.rest.body import read_body
from telha.rest.openapi_parts import BODY_TIMEOUT, ERRORS, SECURED, answer
from telha.rest.params import parse_uuid_param
from telha.rest.responses import json_response
from telha.rest.state import state
from telha.wire import OutdatedOut, ReprojectOut
from workers_common.format_options import canonical_format

__all__ = ["openapi_paths", "routes"]

#: A re-projection request is a few fields.
_MAX_BODY_BYTES = 4096


class _ReprojectBody(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    format: str | None = None
    source_id: str | None = None
    dry_run: bool = False


def _out(o: Outdated) -> OutdatedOut:
    return OutdatedOut(
        source_id=o.source_id, name=o.name, format=o.format, reason=o.reason,
        fingerprint=o.fingerprint, expected_fingerprint=o.expected, job_id=o.job_id,
    )  # fmt: skip


async def reproject(request: Request) -> Response:
    """POST /v1/reproject ``{"format"?, "sourceId"?, "dryRun"?}`` — list the scope's
    current versions made by another projection or other effective options than a request
    would use now, and (unless ``dryRun``) enqueue a job reading each again from its stored
    raw bytes. Versions whose bytes are gone are listed in ``rawGone``. Answers ``200``
    (a dry run) or ``202`` (jobs enqueued; their states are the progress).

    An administration route: a request acting for principals (``X-Telha-Principals``, a
    key with principals) is refused, not narrowed (docs/rest-api.md, "Principals").

    :raises Forbidden: the request acts for principals.
    :raises RequestError: a malformed body, an unknown format, a bad ``sourceId``.
    """
    access = await require_access(request)
    if access.principals is not None:
        raise Forbidden(
            "POST /v1/reproject administers the whole scope and is not narrowed by"
            " principals: send it with a key without principals and no x-telha-principals"
        )
    scope = access.scope
    raw = await read_body(request, _MAX_BODY_BYTES)
    try:
        body = msgspec.json.decode(raw or b"{}", type=_ReprojectBody)
    except msgspec.ValidationError as exc:
        raise RequestError(f"invalid reproject request: {exc}") from None
    except msgspec.DecodeError as exc:
        raise RequestError(f"the body is not JSON: {exc}") from None
    fmt = None
    if body.format is not None:
        fmt = canonical_format(body.format)
        if fmt not in KNOWN_FORMATS:
            raise RequestError(f"unknown format {body.format!r}")
    source_id = None if body.source_id is None else parse_uuid_param(body.source_id, "sourceId")
    st = state(request)
    done = await Reprojector(st.store.versions, st.ingestor.projections, st.queue).run(
        scope, fmt=fmt, source_id=source_id, dry_run=body.dry_run
    )
    out = ReprojectOut(
        dry_run=body.dry_run,
        outdated=[_out(o) for o in done.outdated],
        raw_gone=[_out(o) for o in done.raw_gone],
        up_to_date=done.up_to_date,
    )
    return json_response(out, 200 if body.dry_run or not done.outdated else 202)


routes = [Route("/v1/reproject", reproject, methods=["POST"])]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/reproject": {
            "post": {
                "summary": "Read outdated current versions again from their stored raw bytes",
                "description": (
                    "The scope's current versions made by another projection or other"
                    " effective options than a request would use now (of `format`, of"
                    " `sourceId`, when given) each get a job reading their stored bytes;"
                    " `dryRun` only lists them. Erased and retired sources are never"
                    " touched; versions whose raw bytes are gone are listed in rawGone."
                    " An administration route: a request acting for principals is"
                    " refused (403 FORBIDDEN), not narrowed."
                ),
                "security": SECURED,
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "format": {"type": "string"},
                                    "sourceId": {"type": "string"},
                                    "dryRun": {"type": "boolean"},
                                },
                            },
                        }
                    },
                },
                "responses": {
                    "200": answer("ReprojectOut", "a dry run, or nothing outdated"),
                    "202": answer("ReprojectOut", "the outdated versions' jobs, enqueued"),
                    "408": BODY_TIMEOUT,
                    **ERRORS,
                },
            }
        },
    }
