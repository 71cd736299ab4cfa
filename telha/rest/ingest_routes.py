"""``POST /v1/ingest`` (docs/rest-api.md): 201 applied, 200 deduplicated, typed 4xx otherwise."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import NotFound, QuotaExceeded, RequestError, TelhaError
from telha.domain.ids import id_str
from telha.ingest.ingestor import IngestResult
from telha.ingest.request import KNOWN_FORMATS, parse_ingest_request
from telha.offload import off_loop
from telha.rest.access import require_access, require_admitted, require_scope
from telha.rest.body import read_body
from telha.rest.connector_ingest import (
    as_connector,
    connector_identity,
    record_acl_first,
    record_item,
)
from telha.rest.openapi_parts import (
    BODY_TIMEOUT,
    ERASED,
    ERRORS,
    QUOTA,
    SECURED,
    UUID,
    answer,
    param,
)
from telha.rest.params import parse_uuid
from telha.rest.responses import json_response
from telha.rest.shapes import job_out
from telha.rest.state import state
from telha.rest.upload import receive_upload
from telha.wire import Deduplicated, IngestApplied, IngestEnqueued
from workers_common.format_options import ALIASES

__all__ = ["openapi_paths", "routes"]


def _outcome(result: IngestResult) -> str:
    """The ``outcome`` label of ``telha_ingest_requests_total`` for a successful ingest."""
    if result.deduplicated:
        return "deduplicated"
    return "enqueued" if result.job_id is not None else "created"


async def ingest(request: Request) -> Response:
    """POST /v1/ingest: validate, dedup, apply; see :class:`~telha.ingest.ingestor.Ingestor`.
    With an ``x-connector-token`` instead of an ``x-api-key`` the request ingests as that
    connector (:func:`telha.rest.connector_ingest.as_connector`).

    A JSON body (docs/rest-api.md) or ``multipart/form-data`` with a ``file`` part and ``format``,
    ``name``, ``options`` fields (streamed to disk, :mod:`telha.rest.upload`). The request
    holds one of the ``ingest.max_concurrent`` slots while it is handled, at most the
    scope's ``max_concurrent_ingests`` of them (docs/operations.md, "Fair slots").
    """
    auth = await connector_identity(request)
    scope = auth.scope if auth is not None else await require_scope(request)
    st = state(request)
    limits = await st.quotas.limits(scope)
    try:
        st.ingest_slots.take(scope, limits.max_concurrent_ingests)
    except QuotaExceeded:
        st.quotas.count_refusal()
        raise
    started = time.perf_counter()
    fmt, size = "unknown", 0
    try:
        content_type = request.headers.get("content-type", "")
        if content_type.lower().startswith("multipart/form-data"):
            limit = st.config.ingest.max_upload_bytes
            async with receive_upload(request, st.upload_dir, limit) as up:
                if auth is not None:  # refused once read: the client gets its answer
                    raise RequestError("a connector token sends a JSON body, not multipart")
                fmt, size = up.format, up.file.size
                cap = await st.quotas.check_ingest(scope, makes_job=fmt != "json")
                result = await st.ingestor.ingest_upload(
                    scope, up.format, up.name, up.options, up.file, max_pending=cap
                )
        else:
            body = await read_body(request, st.config.ingest.max_body_bytes)
            req = as_connector(await off_loop(len(body), parse_ingest_request, body), auth)
            fmt, size = req.format, len(req.raw or b"")
            cap = await st.quotas.check_ingest(scope, makes_job=fmt != "json")
            if auth is not None:
                await record_acl_first(st, auth, req)
            result = await st.ingestor.ingest(scope, req, max_pending=cap)
            if auth is not None:
                await record_item(st, auth, req, result.source_id)
    except QuotaExceeded:  # the early check's, or the enqueue transaction's own count
        st.metrics.ingest_requests.labels(fmt, "error").inc()
        st.quotas.count_refusal()
        raise
    except TelhaError:
        st.metrics.ingest_requests.labels(fmt, "error").inc()
        raise
    finally:
        st.ingest_slots.release(scope)
    st.metrics.ingest_seconds.labels(fmt).observe(time.perf_counter() - started)
    st.metrics.ingest_accepted(fmt, _outcome(result), size)
    if result.deduplicated:
        job = id_str(result.job_id) if result.job_id else None
        return json_response(
            Deduplicated(deduplicated=True, source_id=str(result.source_id), job_id=job)
        )
    if result.job_id is not None:
        job_id = id_str(result.job_id)
        return json_response(
            IngestEnqueued(
                deduplicated=False,
                job_id=job_id,
                source_id=str(result.source_id),
                status_url=f"/v1/ingest/{job_id}",
            ),
            202,
        )
    assert result.source_version_tx is not None
    return json_response(
        IngestApplied(
            deduplicated=False,
            source_id=str(result.source_id),
            source_version_tx=result.source_version_tx,
            node_ids=[id_str(n) for n in result.node_ids],
            edge_ids=[id_str(e) for e in result.edge_ids],
            stats=result.stats,
        ),
        201,
    )


async def job_status(request: Request) -> Response:
    """GET /v1/ingest/{jobId}: the job's state, attempts and event list (its manifest), its
    parent job and its children counted by state (:func:`job_out`)."""
    access = await require_access(request)
    scope = access.scope
    job_id = parse_uuid(request.path_params["job_id"], "job")
    st = state(request)
    job = await st.queue.get(scope, job_id)
    if job is None:
        raise NotFound("no such job")
    await require_admitted(request, access, job.source_id, "no such job")
    return json_response(await job_out(st, scope, job))


routes = [
    Route("/v1/ingest", ingest, methods=["POST"]),
    Route("/v1/ingest/{job_id}", job_status, methods=["GET"]),
]


#: The fields of ``POST /v1/ingest`` only a connector token sends (docs/connectors.md,
#: "Ingesting as a connector").
CONNECTOR_INGEST_FIELDS = {
    "externalId": {
        "type": ["string", "null"],
        "description": "connector token only: the item's id in the remote",
    },
    "connector": {
        "type": ["string", "null"],
        "description": "connector token only: must be the token's own connector",
    },
    "acl": {
        "type": ["array", "null"],
        "items": {"type": "string"},
        "description": "connector token only: principals (user:…, group:…)",
    },
    "marker": {
        "type": ["string", "null"],
        "description": "connector token only: the item's change marker",
    },
}

#: Format names a request may use: the formats, then the aliases of known ones (any case).
_FORMAT_NAMES = [*KNOWN_FORMATS, *(a for a, f in ALIASES.items() if f in KNOWN_FORMATS)]

_INGEST_BODY = {
    "type": "object",
    "required": ["format", "name"],
    "additionalProperties": False,
    "properties": {
        "format": {
            "type": "string",
            "enum": _FORMAT_NAMES,
            "description": "case-insensitive; md, txt, htm are aliases",
        },
        "name": {
            "type": "string",
            "minLength": 1,
            "description": "file name or URL (web: an absolute http(s) URL): the source identity",
        },
        "content": {"type": ["string", "null"], "description": "content as text (UTF-8)"},
        "contentBase64": {"type": ["string", "null"], "description": "content as base64 bytes"},
        "options": {
            "type": ["object", "null"],
            "description": "format options; json: label (UPPER_SNAKE), nested (flatten|child),"
            " id_key (a record's id key; true: id, else _id; false, the default: off;"
            " docs/formats.md, JSON records);"
            " any format but json: webhook {url, events} (docs/rest-api.md, Webhooks), and its"
            " worker's options (docs/formats.md); an unknown or ill-typed one answers 400",
        },
        **CONNECTOR_INGEST_FIELDS,
    },
}


_UPLOAD_FORM = {
    "type": "object",
    "required": ["format", "name", "file"],
    "properties": {
        "file": {
            "type": "string",
            "format": "binary",
            "description": "the raw bytes, streamed to disk; at most ingest.max_upload_bytes",
        },
        "format": {"type": "string", "enum": _FORMAT_NAMES},
        "name": {"type": "string", "minLength": 1, "description": "the source identity"},
        "options": {
            "type": "string",
            "description": "format options as a JSON object (webhook: see docs/rest-api.md)",
        },
    },
}


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/ingest": {
            "post": {
                "summary": "Ingest a document (json is applied synchronously)",
                "security": SECURED,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": _INGEST_BODY},
                        "multipart/form-data": {"schema": _UPLOAD_FORM},
                    },
                },
                "responses": {
                    "201": answer("IngestApplied", "format=json applied"),
                    "202": answer("IngestEnqueued", "a job for a format worker was enqueued"),
                    "200": answer(
                        "Deduplicated", "identical bytes to the latest version or a pending job"
                    ),
                    "413": answer(
                        "ErrorBody",
                        "PAYLOAD_TOO_LARGE: over ingest.max_body_bytes (JSON body) or"
                        " ingest.max_upload_bytes (multipart file)",
                    ),
                    "408": BODY_TIMEOUT,
                    "503": answer(
                        "ErrorBody", "UNAVAILABLE: ingest.max_concurrent ingests in progress"
                    ),
                    "410": ERASED,
                    "403": answer(
                        "ErrorBody",
                        "FORBIDDEN: a connector token ingesting as another connector or as"
                        " none, or an API key sending a connector's fields",
                    ),
                    **ERRORS,
                    "429": QUOTA,
                },
            },
        },
        "/v1/ingest/{jobId}": {
            "get": {
                "summary": "A job's state, attempts, events, parent job and children by state",
                "security": SECURED,
                "parameters": [param("jobId", "path", UUID, "job id")],
                "responses": {"200": answer("JobStatus", "the job"), **ERRORS},
            },
        },
    }
