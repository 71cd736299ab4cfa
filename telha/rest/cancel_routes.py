"""``POST /v1/ingest/{jobId}/cancel`` (docs/rest-api.md, "Cancel"): stop a job sent by
mistake. The rules live in :mod:`telha.storage.core.cancel`; the JobQueue tells the worker."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import NotFound
from telha.rest.access import require_access, require_admitted
from telha.rest.params import parse_bool, parse_uuid
from telha.rest.responses import json_response
from telha.rest.shapes import job_out
from telha.rest.state import state

__all__ = ["routes"]


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
