"""The starlette application: routes, authentication and the one error mapping
(docs/rest-api.md, "Errors").

Every error leaves as ``{"error": {"code", "message"}}`` with the status its
:class:`~telha.domain.errors.TelhaError` carries; unknown routes and methods too.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import msgspec
import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from telha.auth import hash_key
from telha.config import Config
from telha.domain.acl import PRINCIPALS_HEADER, Principals, narrow, parse_principals
from telha.domain.errors import (
    NotFound,
    RequestError,
    RequestTimeout,
    StorageError,
    TelhaError,
    Unauthenticated,
    Unavailable,
)
from telha.domain.ids import now_us
from telha.domain.model import Scope
from telha.domain.quotas import default_limits
from telha.domain.request_json import decode_json
from telha.domain.slots import ScopedSlots
from telha.ingest.eraser import Eraser
from telha.ingest.ingestor import Ingestor
from telha.ingest.request import KNOWN_FORMATS
from telha.ingest.sync_runs import SyncRuns
from telha.metrics import Metrics
from telha.queue.job_queue import JobQueue
from telha.rest.access_log import SCOPE_KEY, AccessLogMiddleware
from telha.rest.chunk_cache import ChunkCache
from telha.rest.metrics_middleware import MetricsMiddleware
from telha.rest.quotas import Quotas
from telha.storage.core.keys import LAST_USED_EVERY_US, KeyAccess
from telha.storage.protocol import (
    ConnectorStore,
    JobEventStore,
    KeyStore,
    ListStore,
    QuotaStore,
    RawStore,
    ReadStore,
    ReprojectStore,
    RetireStore,
    SearchStore,
)
from telha.wire import ErrorBody, ErrorDetail, ReadyOut

__all__ = [
    "Access",
    "AppState",
    "RestStore",
    "create_app",
    "json_response",
    "parse_uuid",
    "require_access",
    "require_admitted",
    "require_scope",
]

log = structlog.get_logger("telha.rest")
_HTTP_CODES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 400: "INVALID_REQUEST"}


class RestStore(
    ReadStore,
    ConnectorStore,
    SearchStore,
    RetireStore,
    ReprojectStore,
    ListStore,
    KeyStore,
    JobEventStore,
    RawStore,
    QuotaStore,
    Protocol,
):
    """The storage roles the REST front uses: the read routes' reads, search and locate, the
    retire, the listings, API key lookups, the live event stream's reads, the raw bytes
    pages are rendered from and the quotas."""


@dataclass
class AppState:
    """What the handlers need, hung on ``app.state.telha``."""

    config: Config
    store: RestStore
    ingestor: Ingestor
    queue: JobQueue
    eraser: Eraser
    metrics: Metrics = field(default_factory=Metrics)
    #: Where multipart uploads are received before storage copies them (beside the database).
    upload_dir: Path = Path("data/uploads")
    ready: bool = False
    keys: KeyCache = field(init=False)
    #: Set when the service starts shutting down: open event streams end at once, so they
    #: do not hold up the REST front's drain.
    shutdown: anyio.Event = field(default_factory=anyio.Event)
    #: Bounds concurrent ingests (``ingest.max_concurrent``), per scope too
    #: (``max_concurrent_ingests``); no unbounded wait for the writer.
    ingest_slots: ScopedSlots[Scope] = field(init=False)
    #: Bounds open event streams (``server.max_event_streams``), per scope too
    #: (``max_event_streams``).
    event_streams: ScopedSlots[Scope] = field(init=False)
    #: The chunks last cut, so a chunk listing's later pages cost no new cut.
    chunk_cache: ChunkCache = field(default_factory=ChunkCache)
    #: Per-scope quotas and per-key rate limits (:mod:`telha.rest.quotas`).
    quotas: Quotas = field(init=False)
    #: The HMAC key connector tokens are checked with (``grpc.token_key``, or the key file).
    token_key: bytes = b""
    #: Starts connector runs (``POST /v1/connectors/{id}/runs``); ``None`` in apps without one.
    sync_runs: SyncRuns | None = None

    def __post_init__(self) -> None:
        cfg = self.config
        self.ingest_slots = ScopedSlots(
            cfg.ingest.max_concurrent,
            noun="ingests in progress",
            total_key="ingest.max_concurrent",
            share_key="max_concurrent_ingests",
        )
        self.event_streams = ScopedSlots(
            cfg.server.max_event_streams,
            noun="event streams open",
            total_key="server.max_event_streams",
            share_key="max_event_streams",
        )
        self.keys = KeyCache(self.store)
        defaults = default_limits(
            cfg.quotas,
            ingest_slots=cfg.ingest.max_concurrent,
            event_streams=cfg.server.max_event_streams,
        )
        self.quotas = Quotas(self.store, defaults, self.metrics)


class KeyCache:
    """API key → scope and principals, remembering hits for ``ttl_s`` seconds (a read per
    request otherwise).

    Only known keys are remembered: a key minted while the service runs works at once.
    """

    def __init__(self, store: KeyStore, ttl_s: float = 10.0, max_entries: int = 10_000) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._max = max_entries
        self._hits: dict[bytes, tuple[KeyAccess, float]] = {}
        #: key hash → when this process last wrote its ``last_used_at`` (monotonic s).
        self._used: dict[bytes, float] = {}

    async def access_of(self, key: str) -> KeyAccess:
        """The scope of ``key`` and the principals it acts for.

        :raises Unauthenticated: unknown or revoked key.
        """
        digest = hash_key(key)
        hit = self._hits.get(digest)
        now = time.monotonic()
        if hit is not None and hit[1] > now:
            return hit[0]
        access = await self._store.key_access(digest)
        if access is None:
            self._hits.pop(digest, None)
            raise Unauthenticated("unknown or revoked API key")
        if len(self._hits) >= self._max:
            self._hits.clear()
        self._hits[digest] = (access, now + self._ttl_s)
        await self._note_use(digest, now)
        return access

    async def _note_use(self, digest: bytes, now: float) -> None:
        """Write the key's ``last_used_at`` when this process last did more than
        :data:`~telha.storage.core.keys.LAST_USED_EVERY_US` ago (a storage failure here
        does not refuse the request)."""
        last = self._used.get(digest)
        if last is not None and now - last < LAST_USED_EVERY_US / 1e6:
            return
        if len(self._used) >= self._max:
            self._used.clear()
        self._used[digest] = now
        try:
            await self._store.api_key_used(digest, now_us())
        except StorageError as exc:
            log.warning("key_use_not_noted", error=exc.message)


def state(request: Request) -> AppState:
    """The :class:`AppState` of the app serving ``request``."""
    st: AppState = request.app.state.telha
    return st


def json_response(body: Any, status: int = 200) -> Response:
    """``body`` (a msgspec Struct or plain data) encoded as JSON."""
    return Response(msgspec.json.encode(body), status_code=status, media_type="application/json")


def error_response(code: str, message: str, status: int) -> Response:
    """The one error body shape: ``{"error": {"code", "message"}}``."""
    return json_response(ErrorBody(error=ErrorDetail(code=code, message=message)), status)


@dataclass(frozen=True, slots=True)
class Access:
    """Who a request is: its key's scope, and the principals it acts for (``None``: none,
    the whole scope; docs/rest-api.md, "Principals")."""

    scope: Scope
    principals: Principals | None


async def require_access(request: Request) -> Access:
    """The scope of the request's ``x-api-key``, once the key's rate limit admits the
    request (:meth:`telha.rest.quotas.Quotas.admit`), and the principals it acts for: the
    ``x-telha-principals`` header's (several such headers are one comma-separated list),
    else the key's (:func:`telha.domain.acl.narrow`).

    :raises Unauthenticated: header missing or key unknown/revoked.
    :raises RateLimited: over the scope's ``requests_per_second``.
    :raises RequestError: a malformed ``x-telha-principals`` header.
    :raises Forbidden: the header names a principal the key (having principals) lacks.
    """
    key = request.headers.get("x-api-key")
    if not key:
        raise Unauthenticated("missing x-api-key header")
    st = state(request)
    granted = await st.keys.access_of(key)
    request.scope[SCOPE_KEY] = granted.scope  # for the access log
    await st.quotas.admit(key, granted.scope)
    named = request.headers.getlist(PRINCIPALS_HEADER)
    asked = parse_principals(", ".join(named)) if named else None
    return Access(granted.scope, narrow(granted.principals, asked))


async def require_scope(request: Request) -> Scope:
    """The scope of the request's ``x-api-key`` (:func:`require_access`: an
    ``x-telha-principals`` header is checked on every route).

    :raises Unauthenticated: header missing or key unknown/revoked.
    :raises RateLimited: over the scope's ``requests_per_second``.
    :raises RequestError: a malformed ``x-telha-principals`` header.
    :raises Forbidden: the header names a principal the key lacks.
    """
    return (await require_access(request)).scope


async def require_admitted(
    request: Request, access: Access, source_id: bytes, missing: str = "no such source"
) -> None:
    """Refuse a read of a source the request's principals may not see as if the source
    were absent (:func:`telha.domain.acl.admits`); nothing is read without principals.

    :raises NotFound: ``missing``, the message the route gives for an absent source.
    """
    if access.principals is None:
        return
    if not await state(request).store.source_admitted(access.scope, source_id, access.principals):
        raise NotFound(missing)


def parse_uuid(value: str, what: str) -> bytes:
    """A path or query id as 16 bytes.

    :raises NotFound: ``value`` is not a UUID (so it cannot name anything).
    """
    try:
        return uuid.UUID(value).bytes
    except ValueError:
        raise NotFound(f"no such {what}: {value!r} is not a UUID") from None


_UINT = re.compile(r"^[0-9]{1,19}$")
_INT64_MAX = 2**63 - 1


_T = TypeVar("_T")


def parse_int(value: str | None, what: str, *, minimum: int = 0) -> int | None:
    """An optional non-negative integer query or path parameter (ASCII digits, ≤ 2⁶³−1).

    :raises RequestError: not such an integer, or below ``minimum``.
    """
    if value is None:
        return None
    if not _UINT.match(value) or int(value) > _INT64_MAX:
        raise RequestError(f"{what} must be a non-negative 64-bit integer, got {value!r}")
    n = int(value)
    if n < minimum:
        raise RequestError(f"{what} must be >= {minimum}")
    return n


def parse_choice(value: str | None, field: str, allowed: tuple[str, ...]) -> str | None:
    """An optional query parameter that must be one of ``allowed`` (``None`` when absent).

    :raises RequestError: another value (the message names the field and the values).
    """
    if value is not None and value not in allowed:
        raise RequestError(f"{field} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def decode_body(body: bytes, typ: type[_T], what: str) -> _T:
    """A JSON request body decoded into ``typ`` (a msgspec struct), by the one request
    decoder (:func:`telha.domain.request_json.decode_json`).

    :raises RequestError: not UTF-8 JSON, not of that shape, or nested past the decoder's
        guard (the message names ``what``).
    """
    return decode_json(body, typ, what)


def parse_uuid_param(value: str, what: str) -> bytes:
    """A query-parameter id as 16 bytes.

    :raises RequestError: ``value`` is not a UUID.
    """
    try:
        return uuid.UUID(value).bytes
    except ValueError:
        raise RequestError(f"{what} must be a UUID, got {value!r}") from None


async def _telha_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TelhaError)
    if exc.http_status >= 500:
        log.error("request_failed", path=request.url.path, code=exc.code, error=exc.message)
    response = error_response(exc.code, exc.message, exc.http_status)
    retry_after = getattr(exc, "retry_after_s", None)
    if retry_after is not None:  # whole seconds, rounded up (RFC 9110 §10.2.3)
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    if isinstance(exc, RequestTimeout):  # the rest of the body is not read (RFC 9110 §15.5.9)
        response.headers["Connection"] = "close"
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "HTTP_ERROR")
    return error_response(code, str(exc.detail), exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled_error", path=request.url.path)
    return error_response("INTERNAL", "internal error", 500)


async def healthz(request: Request) -> Response:
    """Liveness: the process answers."""
    return json_response({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Readiness: 200 once storage is open and migrated, 503 while starting or stopping.
    ``formats``: the worker formats a poll stream of this process serves (in-process or
    remote), sorted (docs/operations.md, "Readiness")."""
    st = state(request)
    if not st.ready:
        raise Unavailable("not ready")
    formats = sorted(f for f in st.queue.polled_formats() if f in KNOWN_FORMATS)
    return json_response(ReadyOut(status="ready", formats=formats))


async def metrics(request: Request) -> Response:
    """Prometheus text exposition of this instance's metrics (the active-jobs gauges are
    refreshed first: two counts over the pending/leased partial indexes)."""
    st = state(request)
    await st.queue.refresh_gauges()
    await st.quotas.refresh_gauges()
    body = generate_latest(st.metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def create_app(st: AppState) -> Starlette:
    """Build the app over ``st``; the routes come from :mod:`telha.rest.ingest_routes`,
    :mod:`telha.rest.cancel_routes`, :mod:`telha.rest.event_routes`,
    :mod:`telha.rest.read_routes`, :mod:`telha.rest.chunk_routes`,
    :mod:`telha.rest.version_routes`, :mod:`telha.rest.reproject_routes`,
    :mod:`telha.rest.erase_routes`, :mod:`telha.rest.listing_routes`,
    :mod:`telha.rest.search_routes`,
    :mod:`telha.rest.openapi`, :mod:`telha.rest.page_routes` and
    :mod:`telha.rest.ui_routes` (the viewer's static files at ``/ui/``, no key)."""
    from telha.rest import (
        cancel_routes,
        chunk_routes,
        connector_routes,
        erase_routes,
        event_routes,
        ingest_routes,
        listing_routes,
        openapi,
        page_routes,
        read_routes,
        reproject_routes,
        run_routes,
        search_routes,
        ui_routes,
        usage_routes,
        version_routes,
    )

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *ingest_routes.routes,
        *cancel_routes.routes,
        *event_routes.routes,
        *read_routes.routes,
        *chunk_routes.routes,
        *version_routes.routes,
        *reproject_routes.routes,
        *erase_routes.routes,
        *listing_routes.routes,
        *search_routes.routes,
        *usage_routes.routes,
        *connector_routes.routes,
        *run_routes.routes,
        *openapi.routes,
        *page_routes.routes,
        *ui_routes.routes,
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(MetricsMiddleware, metrics=st.metrics, routes=routes),
            Middleware(AccessLogMiddleware, routes=routes),
        ],
        exception_handlers={
            TelhaError: _telha_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.telha = st
    return app
