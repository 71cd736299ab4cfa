"""The provenance read API (docs/rest-api.md): sources, versions' text and spans, nodes, edges.

Every route is scoped by the caller's key; another scope's ids answer 404.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.domain.errors import NotFound, RequestError
from telha.domain.ids import id_str
from telha.domain.listings import VersionParent
from telha.domain.model import Changes, Direction, NodeVersion, Scope, SourceVersion
from telha.domain.units import Units
from telha.rest.access import Access, require_access, require_admitted
from telha.rest.offsets import converter, units_param
from telha.rest.openapi_parts import (
    AS_OF,
    CURSOR,
    ERASED,
    ERRORS,
    INT,
    LIMIT,
    NODE,
    SECURED,
    SOURCE,
    TX,
    UNITS_PARAM,
    UUID,
    answer,
    param,
)
from telha.rest.params import (
    encode_node_cursor,
    parse_int,
    parse_node_cursor,
    parse_uuid,
    parse_uuid_param,
    version_params,
)
from telha.rest.responses import json_response
from telha.rest.shapes import node_out, source_summary_out
from telha.rest.state import state
from telha.storage.protocol import ReadStore
from telha.wire import (
    AmbiguityOut,
    CandidateOut,
    ChangesOut,
    EdgeList,
    EdgeOut,
    NodeList,
    ProjectionOut,
    RetiredOut,
    SourceOut,
    SpanList,
    SpanOut,
    VersionOut,
    VersionParentOut,
    VersionState,
)

__all__ = ["openapi_paths", "routes"]

_MAX_LIMIT = 1000
_DEFAULT_LIMIT = 100


def _hex(b: bytes | None) -> str | None:
    return b.hex() if b is not None else None


def _state(v: SourceVersion, latest: bool) -> VersionState:
    """How a listed version stands: erased, retired, the current one (the latest), or
    superseded."""
    if v.erased_at is not None:
        return "erased"
    if v.retired_tx is not None:
        return "retired"
    return "current" if latest else "superseded"


def _changes(c: Changes | None) -> ChangesOut | None:
    if c is None:
        return None
    return ChangesOut(
        nodes_added=c.added, nodes_removed=c.removed, nodes_changed=c.changed,
        nodes_unchanged=c.unchanged,
    )  # fmt: skip


def _parent(p: VersionParent | None) -> VersionParentOut | None:
    if p is None:
        return None
    return VersionParentOut(
        job_id=id_str(p.job_id), source_id=id_str(p.source_id) if p.source_id else None,
        name=p.name, source_version_tx=p.tx,
    )  # fmt: skip


def _projection(identity: bytes | None) -> ProjectionOut | None:
    return msgspec.json.decode(identity, type=ProjectionOut) if identity is not None else None


async def get_source(request: Request) -> Response:
    """GET /v1/sources/{sourceId}: the source, retired or not, and its published versions,
    newest first, each with its state, root node and changes; with the fields its listing
    shows (:mod:`telha.rest.listing_routes`). A source whose jobs wrote no version yet
    (pending, or dead) answers with no versions and its last job."""
    access = await require_access(request)
    scope = access.scope
    source_id = parse_uuid(request.path_params["source_id"], "source")
    await require_admitted(request, access, source_id)
    store = state(request).store
    versions = await store.reads.versions(scope, source_id)
    summary = await store.listings.source(scope, source_id)
    if summary is None:
        raise NotFound("no such source")
    parents = await store.listings.version_parents(scope, source_id) if versions else {}
    latest = versions[0] if versions else None
    retired = None
    if latest is not None and latest.retired_tx is not None:
        retired = RetiredOut(tx=latest.retired_tx, reason=latest.retire_reason)
    listed = source_summary_out(summary)
    return json_response(
        SourceOut(
            source_id=id_str(source_id),
            name=latest.name if latest is not None else summary.name,
            format=latest.format if latest is not None else summary.format,
            retired=retired,
            state=listed.state,
            latest_version_tx=listed.latest_version_tx,
            version_count=listed.version_count,
            last_job_id=listed.last_job_id,
            last_job_state=listed.last_job_state,
            changed_at=listed.changed_at,
            versions=[
                VersionOut(
                    source_version_tx=v.tx,
                    state=_state(v, v is latest),
                    published_tx=v.published_tx if v.published_tx is not None else v.tx,
                    root_node_id=id_str(v.root_node_id) if v.root_node_id else None,
                    changes=_changes(v.changes),
                    content_hash=v.content_hash.hex(),
                    canonical_text_hash=_hex(v.canonical_text_hash),
                    size=v.size,
                    worker=v.worker,
                    job_id=id_str(v.job_id) if v.job_id else None,
                    erased=v.erased_at is not None,
                    erased_at=v.erased_at,
                    erasure_reason=v.erase_reason,
                    erasure_id=id_str(v.erasure_id) if v.erasure_id else None,
                    parent=_parent(parents.get(v.tx)),
                    fingerprint=_hex(v.fingerprint),
                    projection=_projection(v.identity),
                    reason=v.reason,
                )
                for v in versions
            ],
        )
    )


async def get_text(request: Request) -> Response:
    """GET /v1/sources/{sourceId}/versions/{tx}/text?start=&end=&units= — canonical text
    [start, end), the bounds in ``units`` (default UTF-8 bytes). An ``end`` past the text's
    end reads to its end; ``X-Text-End`` gives the end of what was returned, in ``units``
    (docs/rest-api.md, "Reading text")."""
    access = await require_access(request)
    scope = access.scope
    source_id, tx = version_params(request)
    start = parse_int(request.query_params.get("start"), "start")
    end = parse_int(request.query_params.get("end"), "end")
    units = units_param(request)
    await require_admitted(request, access, source_id, "no such source version")
    store = state(request).store
    start_units = start or 0
    if units != "byte" and (start is not None or end is not None):
        start, end = await _bytes_of(store.reads, scope, source_id, tx, start, end, units)
    data = await store.reads.text(scope, source_id, tx, start, end)
    if units == "byte":
        real_end = start_units + len(data)
    elif units == "codepoint":
        real_end = start_units + len(data.decode("utf-8"))
    else:
        real_end = start_units + len(data.decode("utf-8").encode("utf-16-le")) // 2
    return Response(
        data, media_type="text/plain; charset=utf-8", headers={"x-text-end": str(real_end)}
    )


async def _bytes_of(
    reads: ReadStore,
    scope: Scope,
    source_id: bytes,
    tx: int,
    start: int | None,
    end: int | None,
    units: Units,
) -> tuple[int | None, int | None]:
    """``start`` and ``end`` given in ``units`` as byte offsets. A character is 1–4 bytes
    and 1–2 UTF-16 units, so position ``k`` lies in bytes ``[k, 4k]``: only the chunks
    holding that range are read."""
    lo = start if start is not None else 0
    hi = end if end is not None else lo
    if lo > hi:
        raise RequestError(f"start ({lo}) is after end ({hi})")
    conv = await converter(reads, scope, source_id, tx, lo, 4 * hi)
    return (
        conv.to_bytes(start, units) if start is not None else None,
        conv.to_bytes(end, units, clamp=True) if end is not None else None,
    )


async def get_spans(request: Request) -> Response:
    """GET /v1/sources/{sourceId}/versions/{tx}/spans?units= — span rows in document order,
    offsets in ``units`` (default UTF-8 bytes)."""
    access = await require_access(request)
    scope = access.scope
    source_id, tx = version_params(request)
    units = units_param(request)
    await require_admitted(request, access, source_id, "no such source version")
    store = state(request).store
    rows = await store.reads.span_rows(scope, source_id, tx)
    offsets = [x for r in rows for x in (r.start, r.end)]
    if units != "byte" and offsets:
        conv = await converter(store.reads, scope, source_id, tx, 0, max(offsets))
        offsets = conv.to_units(offsets, units)
    return json_response(
        SpanList(
            spans=[
                SpanOut(
                    start=offsets[2 * i],
                    end=offsets[2 * i + 1],
                    kind=r.kind,
                    linked_nodes=[id_str(n) for n in r.linked_nodes],
                )
                for i, r in enumerate(rows)
            ]
        )
    )


async def get_node(request: Request) -> Response:
    """GET /v1/nodes/{nodeId}?asOf=&units= — one node version with its provenance text
    (offsets in ``units``, default UTF-8 bytes)."""
    access = await require_access(request)
    scope = access.scope
    node_id = parse_uuid(request.path_params["node_id"], "node")
    as_of = parse_int(request.query_params.get("asOf"), "asOf")
    units = units_param(request)
    store = state(request).store
    node = await _admitted_node(request, access, node_id, as_of)
    out = (await node_out(store.reads, scope, [node], units))[0]
    out.ambiguities = [
        AmbiguityOut(
            kind=a.kind,
            candidates=[msgspec.convert(c, CandidateOut) for c in a.candidates],
            detector_confidence=a.detector_confidence,
            applied_candidate_confidence=a.applied_candidate_confidence,
            severity_hint=a.severity_hint,
        )
        for a in node.ambiguities
    ]
    return json_response(out)


async def _admitted_node(
    request: Request, access: Access, node_id: bytes, as_of: int | None
) -> NodeVersion:
    """The node (as of ``as_of``), when it exists and its source admits the request's
    principals (:func:`~telha.storage.reads.acl.admitted`).

    :raises NotFound: either not (one message for both: no existence leak).
    """
    node = await state(request).store.reads.node(access.scope, node_id, as_of, access.principals)
    if node is None:
        raise NotFound("no such node" + ("" if as_of is None else f" as of {as_of}"))
    return node


async def list_nodes(request: Request) -> Response:
    """GET /v1/nodes?label=&sourceId=&limit=&cursor=&asOf=&units= — nodes (current, or as
    of transaction time ``asOf``, µs), paged by id, provenance offsets in ``units``."""
    access = await require_access(request)
    scope = access.scope
    q = request.query_params
    limit = parse_int(q.get("limit"), "limit", minimum=1) or _DEFAULT_LIMIT
    if limit > _MAX_LIMIT:
        raise RequestError(f"limit must be <= {_MAX_LIMIT}")
    units = units_param(request)
    source = q.get("sourceId")
    source_id = parse_uuid_param(source, "sourceId") if source is not None else None
    store = state(request).store
    nodes = await store.reads.nodes(
        scope,
        label=q.get("label"),
        source_id=source_id,
        limit=limit + 1,
        after=parse_node_cursor(q.get("cursor")),
        as_of=parse_int(q.get("asOf"), "asOf"),
        principals=access.principals,
    )
    more = len(nodes) > limit
    nodes = nodes[:limit]
    cursor = encode_node_cursor(nodes[-1].node_id) if more else None
    out = await node_out(store.reads, scope, nodes, units)
    return json_response(NodeList(nodes=out, next_cursor=cursor))


async def node_edges(request: Request) -> Response:
    """GET /v1/nodes/{nodeId}/edges?direction=out|in|both&asOf= — edges (current, or as of
    transaction time ``asOf``, µs) with endpoints in the graph then only."""
    access = await require_access(request)
    node_id = parse_uuid(request.path_params["node_id"], "node")
    raw = request.query_params.get("direction", "both")
    try:
        direction = Direction(raw)
    except ValueError:
        raise RequestError("direction must be out, in or both") from None
    as_of = parse_int(request.query_params.get("asOf"), "asOf")
    await _admitted_node(request, access, node_id, as_of)
    edges = await state(request).store.reads.edges(
        access.scope, node_id, direction, as_of, principals=access.principals
    )
    return json_response(
        EdgeList(
            edges=[
                EdgeOut(
                    edge_id=id_str(e.edge_id),
                    type=e.type,
                    from_=id_str(e.from_id),
                    to=id_str(e.to_id),
                    properties=e.properties,
                )
                for e in edges
            ]
        )
    )


routes = [
    Route("/v1/sources/{source_id}", get_source, methods=["GET"]),
    Route("/v1/sources/{source_id}/versions/{tx}/text", get_text, methods=["GET"]),
    Route("/v1/sources/{source_id}/versions/{tx}/spans", get_spans, methods=["GET"]),
    Route("/v1/nodes", list_nodes, methods=["GET"]),
    Route("/v1/nodes/{node_id}", get_node, methods=["GET"]),
    Route("/v1/nodes/{node_id}/edges", node_edges, methods=["GET"]),
]


def openapi_paths() -> dict[str, Any]:
    """This module's routes in the OpenAPI document (assembled by :mod:`telha.rest.openapi`)."""
    return {
        "/v1/sources/{sourceId}": {
            "get": {
                "summary": "A source, its versions (newest first) and its last job",
                "security": SECURED,
                "parameters": [SOURCE],
                "responses": {"200": answer("SourceOut", "the source"), **ERRORS},
            },
        },
        "/v1/sources/{sourceId}/versions/{tx}/text": {
            "get": {
                "summary": "Canonical text bytes [start, end) of one version",
                "security": SECURED,
                "parameters": [
                    SOURCE,
                    TX,
                    param("start", "query", INT, "first offset (inclusive), in units"),
                    param("end", "query", INT, "last offset (exclusive), in units"),
                    UNITS_PARAM,
                ],
                "responses": {
                    "200": {
                        "description": "the bytes",
                        "content": {"text/plain; charset=utf-8": {"schema": {"type": "string"}}},
                    },
                    "410": ERASED,
                    **ERRORS,
                },
            },
        },
        "/v1/sources/{sourceId}/versions/{tx}/spans": {
            "get": {
                "summary": "Span rows of one version in document order",
                "security": SECURED,
                "parameters": [SOURCE, TX, UNITS_PARAM],
                "responses": {
                    "200": answer("SpanList", "the spans"),
                    "410": ERASED,
                    **ERRORS,
                },
            },
        },
        "/v1/nodes": {
            "get": {
                "summary": "Nodes (current, or as of a transaction time), paged by id",
                "security": SECURED,
                "parameters": [
                    param("label", "query", {"type": "string"}, "only nodes with this label"),
                    param("sourceId", "query", UUID, "only nodes from this source"),
                    LIMIT,
                    CURSOR,
                    AS_OF,
                    UNITS_PARAM,
                ],
                "responses": {"200": answer("NodeList", "a page of nodes"), **ERRORS},
            },
        },
        "/v1/nodes/{nodeId}": {
            "get": {
                "summary": "A node with its provenance spans resolved to text",
                "security": SECURED,
                "parameters": [NODE, AS_OF, UNITS_PARAM],
                "responses": {"200": answer("NodeOut", "the node"), **ERRORS},
            },
        },
        "/v1/nodes/{nodeId}/edges": {
            "get": {
                "summary": "Edges of a node whose endpoints both exist (now, or as of asOf)",
                "security": SECURED,
                "parameters": [
                    NODE,
                    param(
                        "direction",
                        "query",
                        {"type": "string", "enum": ["out", "in", "both"]},
                        "default both",
                    ),
                    AS_OF,
                ],
                "responses": {"200": answer("EdgeList", "the edges"), **ERRORS},
            },
        },
    }
