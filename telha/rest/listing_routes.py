"""The listings (docs/rest-api.md, "Listings"): ``GET /v1/sources`` and ``GET /v1/ingest``,
the scope's sources and jobs, newest first, paged by an opaque cursor; and the summary
fields ``GET /v1/sources/{sourceId}`` and ``GET /v1/ingest/{jobId}`` add from them."""

from __future__ import annotations

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import RequestError
from telha.domain.ids import id_str
from telha.domain.listings import (
    JOB_STATES,
    SOURCE_STATES,
    JobFilter,
    JobSummary,
    Page,
    SourceFilter,
    SourceSummary,
    decode_cursor,
    encode_cursor,
)
from telha.domain.sync_runs import SYNC_FORMATS
from telha.ingest.request import KNOWN_FORMATS
from telha.rest.app import (
    json_response,
    parse_choice,
    parse_int,
    parse_uuid_param,
    require_access,
    state,
)
from telha.rest.job_json import attempts_made
from telha.wire import JobList, JobSummaryOut, SourceList, SourceSummaryOut

__all__ = ["JOB_KINDS", "routes", "source_summary_out"]

#: The kinds a job can have: one per worker format (``json`` makes no job) and ``erase``.
JOB_KINDS = (*(f"ingest:{f}" for f in KNOWN_FORMATS if f != "json"), "erase", *SYNC_FORMATS)
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


def source_summary_out(s: SourceSummary) -> SourceSummaryOut:
    """A listed source as the wire shows it."""
    return SourceSummaryOut(
        source_id=id_str(s.source_id),
        name=s.name,
        format=s.format,
        latest_version_tx=s.latest_tx,
        version_count=s.version_count,
        state=s.state,  # type: ignore[arg-type]  # one of SOURCE_STATES (the table's CHECK)
        last_job_id=id_str(s.last_job_id) if s.last_job_id else None,
        last_job_state=s.last_job_state,
        changed_at=s.changed_at,
    )


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
    item names (:func:`telha.rest.connector_routes.lookup_source`)."""
    access = await require_access(request)
    scope = access.scope
    q = request.query_params
    if "connector" in q or "externalId" in q:
        if "connector" not in q:
            raise RequestError("externalId needs connector")
        from telha.rest.connector_routes import lookup_source  # it imports this module

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
    rows = await state(request).store.list_sources(scope, f, page)
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
    rows = await state(request).store.list_jobs(scope, f, page)
    cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        cursor = encode_cursor(_JOBS_CURSOR, rows[-1].created_at, rows[-1].job_id)
    return json_response(JobList(jobs=[_job_out(j) for j in rows], next_cursor=cursor))


routes = [
    Route("/v1/sources", list_sources, methods=["GET"]),
    Route("/v1/ingest", list_jobs, methods=["GET"]),
]
