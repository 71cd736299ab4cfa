"""The listings (docs/rest-api.md, "Listings"): ``GET /v1/sources`` and ``GET /v1/ingest``,
the scope's sources and jobs, newest first, paged by an opaque cursor, and the source a
connector's item names (``GET /v1/sources?connector=&externalId=``)."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.acl import admits
from telha.domain.connectors import check_external_id
from telha.domain.errors import NotFound, RequestError
from telha.domain.ids import id_str
from telha.domain.listings import (
    JOB_STATES,
    SOURCE_STATES,
    JobFilter,
    JobSummary,
    Page,
    SourceFilter,
    decode_cursor,
    encode_cursor,
)
from telha.ingest.request import KNOWN_FORMATS
from telha.job_json import attempts_made
from telha.rest.access import Access, require_access
from telha.rest.openapi_parts import CURSOR, ERRORS, LIMIT, SECURED, UUID, answer, enum, param, ref
from telha.rest.params import JOB_KINDS, parse_choice, parse_int, parse_uuid_param
from telha.rest.responses import json_response
from telha.rest.shapes import source_summary_out
from telha.rest.state import state
from telha.wire import JobList, JobSummaryOut, SourceList
from telha.wire.connectors import ConnectorSourceOut

__all__ = ["lookup_source", "openapi_paths", "routes"]

_MAX_LIMIT = 1000
_DEFAULT_LIMIT = 100
_SOURCES_CURSOR = b"s"
_JOBS_CURSOR = b"j"


def _page(q: QueryParams, kind: bytes) -> tuple[int, Page]:
    """``limit`` (default 100, 1–1000) and the page to read: one row more than ``limit``
    (whether a next page exists), after the ``cursor``.

    :raises RequestError: a limit out of range, or a cursor this listing did not return.
    """
    limit = parse_int(q.get("limit"), "limit", minimum=1) or _DEFAULT_LIMIT
    if limit > _MAX_LIMIT:
        raise RequestError(f"limit must be <= {_MAX_LIMIT}")
    return limit, Page(limit + 1, decode_cursor(kind, q.get("cursor")))


def _job_out(j: JobSummary) -> JobSummaryOut:
    return JobSummaryOut(
        job_id=id_str(j.job_id),
        kind=j.kind,
        state=j.state,
        source_id=id_str(j.source_id),
        name=j.name,
        attempts=attempts_made(j.attempts, j.state),
        created_at=j.created_at,
        updated_at=j.updated_at,
        failure_reason=j.failure_reason,
        parent_job_id=id_str(j.parent_job_id) if j.parent_job_id else None,
    )


async def list_sources(request: Request) -> Response:
    """GET /v1/sources?prefix=&format=&state=&limit=&cursor= — the scope's sources, newest
    change first; with ``connector`` and ``externalId`` the one source that connector's
    item names (:func:`lookup_source`)."""
    access = await require_access(request)
    scope = access.scope
    q = request.query_params
    if "connector" in q or "externalId" in q:
        if "connector" not in q:
            raise RequestError("externalId needs connector")
        return await lookup_source(request, access, q)
    prefix = q.get("prefix")
    if prefix is not None and "\x00" in prefix:
        raise RequestError("prefix must not contain NUL")
    f = SourceFilter(
        prefix=prefix,
        format=parse_choice(q.get("format"), "format", KNOWN_FORMATS),
        state=parse_choice(q.get("state"), "state", SOURCE_STATES),
        principals=access.principals,
    )
    limit, page = _page(q, _SOURCES_CURSOR)
    rows = await state(request).store.listings.sources(scope, f, page)
    cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        cursor = encode_cursor(_SOURCES_CURSOR, rows[-1].changed_at, rows[-1].source_id)
    return json_response(
        SourceList(sources=[source_summary_out(s) for s in rows], next_cursor=cursor)
    )


async def list_jobs(request: Request) -> Response:
    """GET /v1/ingest?state=&kind=&sourceId=&parent=&limit=&cursor= — the scope's jobs,
    newest first."""
    access = await require_access(request)
    scope = access.scope
    q = request.query_params
    source, parent = q.get("sourceId"), q.get("parent")
    f = JobFilter(
        state=parse_choice(q.get("state"), "state", JOB_STATES),
        kind=parse_choice(q.get("kind"), "kind", JOB_KINDS),
        source_id=parse_uuid_param(source, "sourceId") if source is not None else None,
        parent=parse_uuid_param(parent, "parent") if parent is not None else None,
        principals=access.principals,
    )
    limit, page = _page(q, _JOBS_CURSOR)
    rows = await state(request).store.listings.jobs(scope, f, page)
    cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        cursor = encode_cursor(_JOBS_CURSOR, rows[-1].created_at, rows[-1].job_id)
    return json_response(JobList(jobs=[_job_out(j) for j in rows], next_cursor=cursor))


async def lookup_source(request: Request, access: Access, q: QueryParams) -> Response:
    """``GET /v1/sources?connector=ID&externalId=X``: the source a connector's item names
    and its ``rootNodeId`` (:class:`~telha.wire.connectors.ConnectorSourceOut`).

    :raises RequestError: ``connector`` not a UUID, ``externalId`` missing or bad, or other
        listing parameters given with them.
    :raises NotFound: the connector made no source for that external id, or its ACL
        admits none of the request's principals (:func:`telha.domain.acl.admits`).
    """
    extra = sorted(set(q) - {"connector", "externalId"})
    if extra:
        raise RequestError(f"connector/externalId lookup takes no other parameter: {extra}")
    connector_id = parse_uuid_param(q["connector"], "connector")
    if "externalId" not in q:
        raise RequestError("externalId is required with connector")
    external_id = check_external_id(q["externalId"])
    store, scope = state(request).store, access.scope
    item = await store.connectors.find_item(scope, connector_id, external_id)
    if item is None or not admits(item.acl, access.principals):
        raise NotFound("no source for that connector and externalId")
    summary = await store.listings.source(scope, item.source_id)
    if summary is None:
        raise NotFound("no source for that connector and externalId")
    versions = await store.reads.versions(scope, item.source_id)
    root = versions[0].root_node_id if versions else None
    listed = source_summary_out(summary)
    return json_response(
        ConnectorSourceOut(
            connector_id=id_str(connector_id),
            external_id=external_id,
            source_id=id_str(item.source_id),
            name=versions[0].name if versions else summary.name,
            state=listed.state,
            latest_version_tx=listed.latest_version_tx,
            root_node_id=id_str(root) if root else None,
            acl=item.acl,
            retired=item.retired_at is not None,
        )
    )


routes = [
    Route("/v1/sources", list_sources, methods=["GET"]),
    Route("/v1/ingest", list_jobs, methods=["GET"]),
]


def _lookup_parameters() -> list[dict[str, Any]]:
    """``connector`` and ``externalId`` of ``GET /v1/sources``."""
    return [
        param(
            "connector",
            "query",
            {"type": "string", "format": "uuid"},
            "with externalId: the one source this connector's item names",
        ),
        param(
            "externalId",
            "query",
            {"type": "string", "minLength": 1},
            "the item's id in the remote (with connector)",
        ),
    ]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/ingest": {
            "get": {
                "summary": "The scope's jobs, newest first, paged",
                "description": (
                    "Jobs by creation time, newest first; pass nextCursor as cursor for the"
                    " next page (with the same filters). A filter value that is not one of"
                    " those listed, a limit out of range or a cursor this listing did not"
                    " return answer 400."
                ),
                "security": SECURED,
                "parameters": [
                    param("state", "query", enum(JOB_STATES), "only jobs in this state"),
                    param("kind", "query", enum(JOB_KINDS), "only jobs of this kind"),
                    param("sourceId", "query", UUID, "only this source's jobs"),
                    param("parent", "query", UUID, "only the children of this job"),
                    LIMIT,
                    CURSOR,
                ],
                "responses": {"200": answer("JobList", "a page of jobs"), **ERRORS},
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
                "security": SECURED,
                "parameters": [
                    param("prefix", "query", {"type": "string"}, "only names starting with this"),
                    param("format", "query", enum(KNOWN_FORMATS), "only this format"),
                    param("state", "query", enum(SOURCE_STATES), "only sources in this state"),
                    LIMIT,
                    CURSOR,
                    *_lookup_parameters(),
                ],
                "responses": {
                    "200": {
                        "description": "a page of sources, or the connector item's source",
                        "content": {
                            "application/json": {
                                "schema": {"oneOf": [ref("SourceList"), ref("ConnectorSourceOut")]}
                            }
                        },
                    },
                    **ERRORS,
                },
            },
        },
    }
