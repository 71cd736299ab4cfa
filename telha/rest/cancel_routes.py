"""``POST /v1/ingest/{jobId}/cancel`` (docs/rest-api.md, "Cancel"): stop a job sent by
mistake. The rules live in :mod:`telha.storage.jobs.cancel`; the JobQueue tells the worker."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import NotFound
from telha.rest.access import require_access, require_admitted
from telha.rest.openapi_parts import ERRORS, SECURED, UUID, answer, param
from telha.rest.params import parse_bool, parse_uuid
from telha.rest.responses import json_response
from telha.rest.shapes import job_out
from telha.rest.state import state

__all__ = ["openapi_paths", "routes"]


async def cancel_job(request: Request) -> Response:
    """POST /v1/ingest/{jobId}/cancel?children= — cancel a pending or leased job (a leased
    one's lease is revoked and its worker told); with ``children=true`` its unfinished child
    jobs too. Answers the job as ``GET /v1/ingest/{jobId}`` does; cancelling again answers
    the same job.

    :raises NotFound: no such job in the key's scope, or (with principals) a job of a
        source they may not see (docs/rest-api.md, "Principals": as if absent).
    :raises JobFinished: the job ended ``completed`` (without ``children``) or ``dead``.
    """
    access = await require_access(request)
    scope = access.scope
    job_id = parse_uuid(request.path_params["job_id"], "job")
    children = parse_bool(request.query_params.get("children"), "children")
    st = state(request)
    if access.principals is not None:  # a job of a source not seen: as if absent
        seen = await st.queue.get(scope, job_id)
        if seen is None:
            raise NotFound("no such job")
        await require_admitted(request, access, seen.source_id, "no such job")
    job = await st.queue.cancel(scope, job_id, children=children)
    return json_response(await job_out(st, scope, job))


routes = [Route("/v1/ingest/{job_id}/cancel", cancel_job, methods=["POST"])]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
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
                "security": SECURED,
                "parameters": [
                    param("jobId", "path", UUID, "job id"),
                    param(
                        "children",
                        "query",
                        {"type": "string", "enum": ["true", "false"]},
                        "also cancel the job's unfinished child jobs (default false)",
                    ),
                ],
                "responses": {
                    "200": answer("JobStatus", "the job as it is now (as GET answers it)"),
                    "409": answer(
                        "ErrorBody",
                        "JOB_FINISHED: the job ended completed or dead; CONFLICT: an erasure",
                    ),
                    **ERRORS,
                },
            },
        },
    }
