"""``GET /openapi.json``: the REST API described (OpenAPI 3.1), schemas generated from
:mod:`telha.wire` so the document cannot drift from what the handlers encode."""

from __future__ import annotations

import functools
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha import __version__, wire, wire_connectors
from telha.domain.chunking import MAX_CHUNK_BYTES, MIN_CHUNK_BYTES
from telha.domain.listings import JOB_STATES, SOURCE_STATES
from telha.domain.units import UNITS
from telha.ingest.request import KNOWN_FORMATS
from telha.rest.openapi_connectors import (
    CONNECTOR_INGEST_FIELDS,
    CONNECTOR_TYPES,
    connector_paths,
    lookup_parameters,
)
from telha.rest.openapi_erase import erase_paths
from telha.rest.openapi_pages import page_paths
from telha.rest.openapi_principals import with_principals
from telha.rest.openapi_quotas import refusals, usage_paths
from telha.rest.openapi_reproject import reproject_paths
from telha.rest.openapi_search import search_paths
from telha.rest.params import JOB_KINDS
from workers_common.format_options import ALIASES

__all__ = ["openapi_document", "routes"]

_REF = "#/components/schemas/{name}"


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _REF.format(name=name)}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


_RATE_LIMITED, _QUOTA = refusals(_json)
_ERRORS = {
    "400": _json("ErrorBody", "INVALID_REQUEST or INVALID_CONTENT"),
    "401": _json("ErrorBody", "UNAUTHENTICATED: missing or unknown x-api-key"),
    "404": _json("ErrorBody", "NOT_FOUND (also for another scope's ids)"),
    "429": _RATE_LIMITED,
}
#: The answer of every route that reads a body (telha/rest/body.py).
_BODY_TIMEOUT = _json(
    "ErrorBody", "REQUEST_TIMEOUT: the body sent nothing for server.body_idle_timeout_s"
)
_ERASED = _json(
    "ErrorBody", "CONTENT_ERASED: the content (or this version) was erased (GDPR) for good"
)
_CONFLICT = _json("ErrorBody", "CONFLICT: the source is being erased, or was erased")

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


def _param(name: str, where: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": schema,
        "description": description,
    }


def _enum(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


_UUID = {"type": "string", "format": "uuid"}
_INT = {"type": "integer", "minimum": 0}
_SOURCE = _param("sourceId", "path", _UUID, "source id")
_TX = _param("tx", "path", _INT, "source version transaction time, µs")
_NODE = _param("nodeId", "path", _UUID, "logical node id")
_AS_OF = _param(
    "asOf", "query", _INT, "transaction time, µs: the graph as it was then (default now)"
)
_LIMIT = _param(
    "limit", "query", {"type": "integer", "minimum": 1, "maximum": 1000}, "page size (100)"
)
_CURSOR = _param("cursor", "query", {"type": "string"}, "nextCursor of the previous page")
_UNITS = _param(
    "units",
    "query",
    _enum(UNITS),
    "offsets in UTF-8 bytes (default), Unicode code points (Python str indices) or UTF-16"
    " code units (JavaScript string indices)",
)

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


def _paths() -> dict[str, Any]:
    secured: list[dict[str, list[str]]] = [{"apiKey": []}]
    return {
        "/v1/ingest": {
            "post": {
                "summary": "Ingest a document (json is applied synchronously)",
                "security": secured,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": _INGEST_BODY},
                        "multipart/form-data": {"schema": _UPLOAD_FORM},
                    },
                },
                "responses": {
                    "201": _json("IngestApplied", "format=json applied"),
                    "202": _json("IngestEnqueued", "a job for a format worker was enqueued"),
                    "200": _json(
                        "Deduplicated", "identical bytes to the latest version or a pending job"
                    ),
                    "413": _json(
                        "ErrorBody",
                        "PAYLOAD_TOO_LARGE: over ingest.max_body_bytes (JSON body) or"
                        " ingest.max_upload_bytes (multipart file)",
                    ),
                    "408": _BODY_TIMEOUT,
                    "503": _json(
                        "ErrorBody", "UNAVAILABLE: ingest.max_concurrent ingests in progress"
                    ),
                    "410": _ERASED,
                    "403": _json(
                        "ErrorBody",
                        "FORBIDDEN: a connector token ingesting as another connector or as"
                        " none, or an API key sending a connector's fields",
                    ),
                    **_ERRORS,
                    "429": _QUOTA,
                },
            },
            "get": {
                "summary": "The scope's jobs, newest first, paged",
                "description": (
                    "Jobs by creation time, newest first; pass nextCursor as cursor for the"
                    " next page (with the same filters). A filter value that is not one of"
                    " those listed, a limit out of range or a cursor this listing did not"
                    " return answer 400."
                ),
                "security": secured,
                "parameters": [
                    _param("state", "query", _enum(JOB_STATES), "only jobs in this state"),
                    _param("kind", "query", _enum(JOB_KINDS), "only jobs of this kind"),
                    _param("sourceId", "query", _UUID, "only this source's jobs"),
                    _param("parent", "query", _UUID, "only the children of this job"),
                    _LIMIT,
                    _CURSOR,
                ],
                "responses": {"200": _json("JobList", "a page of jobs"), **_ERRORS},
            },
        },
        "/v1/sources": {
            "get": {
                "summary": "The scope's sources, newest change first, paged",
                "description": (
                    "Sources by their last change (a job enqueued, a version published,"
                    " retired or erased), newest first; state pending: only jobs, dead ones"
                    " included. Pass nextCursor as cursor for the next page (with the same"
                    " filters). A filter value that is not one of those listed, a limit out"
                    " of range or a cursor this listing did not return answer 400. With"
                    " connector and externalId (and no other parameter): the one source"
                    " that connector's item names (ConnectorSourceOut), 404 when none."
                ),
                "security": secured,
                "parameters": [
                    _param("prefix", "query", {"type": "string"}, "only names starting with this"),
                    _param("format", "query", _enum(KNOWN_FORMATS), "only this format"),
                    _param("state", "query", _enum(SOURCE_STATES), "only sources in this state"),
                    _LIMIT,
                    _CURSOR,
                    *lookup_parameters(_param),
                ],
                "responses": {
                    "200": {
                        "description": "a page of sources, or the connector item's source",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "oneOf": [_ref("SourceList"), _ref("ConnectorSourceOut")]
                                }
                            }
                        },
                    },
                    **_ERRORS,
                },
            }
        },
        "/v1/ingest/{jobId}": {
            "get": {
                "summary": "A job's state, attempts, events, parent job and children by state",
                "security": secured,
                "parameters": [_param("jobId", "path", _UUID, "job id")],
                "responses": {"200": _json("JobStatus", "the job"), **_ERRORS},
            }
        },
        "/v1/ingest/{jobId}/cancel": {
            "post": {
                "summary": "Cancel a job: pending ones at once, a leased one's lease revoked",
                "description": (
                    "A pending job becomes cancelled at once; a leased one's lease is revoked"
                    " (its worker's next heartbeat or submission is refused and writes"
                    " nothing; the worker is sent a cancel message) and a half-streamed"
                    " version is abandoned (the previous version stays current). cancelled"
                    " is terminal, counts no attempt and is never retried; the same bytes"
                    " posted again make a new job. Cancelling again answers the same job."
                    " children=true also cancels the job's unfinished child jobs (and"
                    " theirs); a completed parent is then accepted as it is."
                ),
                "security": secured,
                "parameters": [
                    _param("jobId", "path", _UUID, "job id"),
                    _param(
                        "children",
                        "query",
                        {"type": "string", "enum": ["true", "false"]},
                        "also cancel the job's unfinished child jobs (default false)",
                    ),
                ],
                "responses": {
                    "200": _json("JobStatus", "the job as it is now (as GET answers it)"),
                    "409": _json(
                        "ErrorBody",
                        "JOB_FINISHED: the job ended completed or dead; CONFLICT: an erasure",
                    ),
                    **_ERRORS,
                },
            }
        },
        "/v1/ingest/{jobId}/events": {
            "get": {
                "summary": "A job's events as Server-Sent Events, live, until the terminal one",
                "description": (
                    "text/event-stream: one message per event of the job's list (as GET"
                    " /v1/ingest/{jobId} shows them), `id` its sequence number and `data`"
                    " the JobEventOut JSON, oldest first: those already written, then each"
                    " one as it is written; the stream ends after the terminal event"
                    " (completed, dead, cancelled). Reconnect with Last-Event-ID to resume"
                    " after it."
                ),
                "security": secured,
                "parameters": [
                    _param("jobId", "path", _UUID, "job id"),
                    _param(
                        "Last-Event-ID",
                        "header",
                        _INT,
                        "resume after this event (its id, a sequence number); default 0",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the event stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "503": _json(
                        "ErrorBody",
                        "UNAVAILABLE: server.max_event_streams streams open, or shutting down",
                    ),
                    **_ERRORS,
                    "429": _json(
                        "ErrorBody",
                        "QUOTA_EXCEEDED: the scope holds its max_event_streams, or RATE_LIMITED",
                    )
                    | {"headers": _QUOTA["headers"]},
                },
            }
        },
        "/v1/sources/{sourceId}": {
            "get": {
                "summary": "A source, its versions (newest first) and its last job",
                "security": secured,
                "parameters": [_SOURCE],
                "responses": {"200": _json("SourceOut", "the source"), **_ERRORS},
            },
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
                "security": secured,
                "parameters": [
                    _SOURCE,
                    _param(
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
                    "200": _json("RetireOut", "the retire (the first one's, when retired again)"),
                    "409": _CONFLICT,
                    "408": _BODY_TIMEOUT,
                    **_ERRORS,
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
                "security": secured,
                "parameters": [
                    _SOURCE,
                    _param(
                        "from",
                        "query",
                        _INT,
                        "a version's transaction time, µs (default: the version before `to`;"
                        " none when `to` is the first: every node is added)",
                    ),
                    _param(
                        "to",
                        "query",
                        _INT,
                        "a version's transaction time, µs, after `from` (default: the latest)",
                    ),
                    _LIMIT,
                    _CURSOR,
                    _UNITS,
                ],
                "responses": {
                    "200": _json("DiffOut", "a page of the diff"),
                    "410": _ERASED,
                    **_ERRORS,
                },
            }
        },
        **erase_paths(_ref, _param, _enum, _SOURCE, {**_ERRORS, "408": _BODY_TIMEOUT}, secured),
        "/v1/sources/{sourceId}/versions/{tx}/text": {
            "get": {
                "summary": "Canonical text bytes [start, end) of one version",
                "security": secured,
                "parameters": [
                    _SOURCE,
                    _TX,
                    _param("start", "query", _INT, "first offset (inclusive), in units"),
                    _param("end", "query", _INT, "last offset (exclusive), in units"),
                    _UNITS,
                ],
                "responses": {
                    "200": {
                        "description": "the bytes",
                        "content": {"text/plain; charset=utf-8": {"schema": {"type": "string"}}},
                    },
                    "410": _ERASED,
                    **_ERRORS,
                },
            }
        },
        "/v1/sources/{sourceId}/versions/{tx}/spans": {
            "get": {
                "summary": "Span rows of one version in document order",
                "security": secured,
                "parameters": [_SOURCE, _TX, _UNITS],
                "responses": {
                    "200": _json("SpanList", "the spans"),
                    "410": _ERASED,
                    **_ERRORS,
                },
            }
        },
        "/v1/sources/{sourceId}/versions/{tx}/chunks": {
            "get": {
                "summary": "Retrieval chunks of one version, in reading order, paged",
                "description": (
                    "Deterministic chunks of at most maxBytes UTF-8 bytes: never cut inside"
                    " a span that fits (a longer one is cut at a sentence end, else"
                    " whitespace, else a character boundary), never across a top-level"
                    " SECTION unless within=document; a chunk of table rows repeats the"
                    " header first (its range is the chunk's second range). Pass nextCursor"
                    " as cursor with the same parameters for the next page."
                ),
                "security": secured,
                "parameters": [
                    _SOURCE,
                    _TX,
                    _param(
                        "maxBytes",
                        "query",
                        {"type": "integer", "minimum": MIN_CHUNK_BYTES, "maximum": MAX_CHUNK_BYTES},
                        "the most UTF-8 bytes of a chunk's text (2048)",
                    ),
                    _param(
                        "overlap",
                        "query",
                        {"type": "integer", "minimum": 0, "maximum": MAX_CHUNK_BYTES // 2},
                        "bytes a chunk may repeat of the one before, at most maxBytes/2 (0)",
                    ),
                    _param(
                        "within",
                        "query",
                        _enum(("section", "document")),
                        "section (default): never cross a top-level section",
                    ),
                    _UNITS,
                    _LIMIT,
                    _CURSOR,
                ],
                "responses": {
                    "200": _json("ChunkList", "a page of chunks"),
                    "410": _ERASED,
                    "413": _json(
                        "ErrorBody", "PAYLOAD_TOO_LARGE: the version's text is over 16 MiB"
                    ),
                    **_ERRORS,
                },
            }
        },
        "/v1/nodes": {
            "get": {
                "summary": "Nodes (current, or as of a transaction time), paged by id",
                "security": secured,
                "parameters": [
                    _param("label", "query", {"type": "string"}, "only nodes with this label"),
                    _param("sourceId", "query", _UUID, "only nodes from this source"),
                    _LIMIT,
                    _CURSOR,
                    _AS_OF,
                    _UNITS,
                ],
                "responses": {"200": _json("NodeList", "a page of nodes"), **_ERRORS},
            }
        },
        "/v1/nodes/{nodeId}": {
            "get": {
                "summary": "A node with its provenance spans resolved to text",
                "security": secured,
                "parameters": [_NODE, _AS_OF, _UNITS],
                "responses": {"200": _json("NodeOut", "the node"), **_ERRORS},
            }
        },
        "/v1/nodes/{nodeId}/edges": {
            "get": {
                "summary": "Edges of a node whose endpoints both exist (now, or as of asOf)",
                "security": secured,
                "parameters": [
                    _NODE,
                    _param(
                        "direction",
                        "query",
                        {"type": "string", "enum": ["out", "in", "both"]},
                        "default both",
                    ),
                    _AS_OF,
                ],
                "responses": {"200": _json("EdgeList", "the edges"), **_ERRORS},
            }
        },
        "/healthz": {
            "get": {"summary": "Liveness", "responses": {"200": {"description": "alive"}}}
        },
        "/readyz": {
            "get": {
                "summary": "Readiness",
                "description": "200 {status: ready, formats: [...]}: formats lists the worker"
                " formats a worker of this process polls (in-process or remote over gRPC);"
                " a job of another format waits (its GET carries a hint).",
                "responses": {
                    "200": _json("ReadyOut", "ready"),
                    "503": _json("ErrorBody", "UNAVAILABLE"),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {"200": {"description": "text exposition format"}},
            }
        },
        **search_paths(_param, _json, _ERRORS, secured, KNOWN_FORMATS),
        **page_paths(_SOURCE, _TX, _param, _ERRORS, _ERASED, secured),
        **usage_paths(_json, _ERRORS, secured),
        **reproject_paths(_json, _ERRORS, _BODY_TIMEOUT, secured),
        **connector_paths(_ref, _param, _json, _ERRORS, _BODY_TIMEOUT, secured),
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {"200": {"description": "OpenAPI 3.1"}},
            }
        },
    }


@functools.cache
def openapi_document() -> bytes:
    """The OpenAPI 3.1 document as JSON bytes (built once)."""
    types = [getattr(wire, name) for name in wire.__all__]
    types += [getattr(wire_connectors, name) for name in CONNECTOR_TYPES]
    _, components = msgspec.json.schema_components(types, ref_template=_REF)
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "Telha", "version": __version__},
        "paths": with_principals(_paths()),
        "components": {
            "schemas": components,
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}},
        },
    }
    return msgspec.json.encode(doc)


async def openapi_json(request: Request) -> Response:
    """GET /openapi.json."""
    return Response(openapi_document(), media_type="application/json")


routes = [Route("/openapi.json", openapi_json, methods=["GET"])]
