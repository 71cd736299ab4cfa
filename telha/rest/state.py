"""What every route handler shares: the app's state (:class:`AppState`, hung on
``app.state.telha``), the storage roles the REST front uses and the API key cache."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio
import structlog
from starlette.requests import Request

from telha.auth import hash_key
from telha.config import Config
from telha.domain.errors import StorageError, Unauthenticated
from telha.domain.ids import now_us
from telha.domain.model import Scope
from telha.domain.quotas import default_limits
from telha.domain.slots import ScopedSlots
from telha.erasure.eraser import Eraser
from telha.ingest.ingestor import Ingestor
from telha.ingest.sync_runs import SyncRuns
from telha.metrics import Metrics
from telha.queue.job_queue import JobQueue
from telha.rest.chunk_cache import ChunkCache
from telha.rest.quotas import Quotas
from telha.storage.api import LAST_USED_EVERY_US, KeyAccess
from telha.storage.protocol import (
    ConnectorStore,
    JobEventStore,
    KeyStore,
    ListStore,
    QuotaStore,
    RawStore,
    ReadStore,
    SearchStore,
    VersionStore,
)

__all__ = ["AppState", "KeyCache", "RestStore", "state"]

log = structlog.get_logger("telha.rest")


class RestStore(JobEventStore, Protocol):
    """The storage the REST front uses: the live event stream's signal and, through it, the
    job aggregate's events; and the connector, key (the per-request lookup), listing, raw
    upload (what pages are rendered from), read, quota, search (search and locate) and
    version (the retire, re-projection's walk) aggregates."""

    @property
    def connectors(self) -> ConnectorStore:
        """Registered connectors, their items and sync runs (``store.connectors``)."""

    @property
    def keys(self) -> KeyStore:
        """API keys: the per-request lookup and its last use (``store.keys``)."""

    @property
    def listings(self) -> ListStore:
        """The listings of sources and jobs (``store.listings``)."""

    @property
    def quotas(self) -> QuotaStore:
        """Per-scope limits and usage (``store.quotas``)."""

    @property
    def raw(self) -> RawStore:
        """Raw uploads the pages are rendered from (``store.raw``)."""

    @property
    def reads(self) -> ReadStore:
        """Reads of what was ingested (``store.reads``)."""

    @property
    def search(self) -> SearchStore:
        """Search, locate and the index's queue (``store.search``)."""

    @property
    def versions(self) -> VersionStore:
        """Source versions: the retire, re-projection's walk (``store.versions``)."""


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
        self.keys = KeyCache(self.store.keys)
        defaults = default_limits(
            cfg.quotas,
            ingest_slots=cfg.ingest.max_concurrent,
            event_streams=cfg.server.max_event_streams,
        )
        self.quotas = Quotas(self.store.quotas, defaults, self.metrics)


class KeyCache:
    """API key → scope and principals, remembering hits for ``ttl_s`` seconds (a read per
    request otherwise).

    Only known keys are remembered: a key minted while the service runs works at once.
    """

    def __init__(self, keys: KeyStore, ttl_s: float = 10.0, max_entries: int = 10_000) -> None:
        self._keys = keys
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
        access = await self._keys.access(digest)
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
        :data:`~telha.storage.api.LAST_USED_EVERY_US` ago (a storage failure here
        does not refuse the request)."""
        last = self._used.get(digest)
        if last is not None and now - last < LAST_USED_EVERY_US / 1e6:
            return
        if len(self._used) >= self._max:
            self._used.clear()
        self._used[digest] = now
        try:
            await self._keys.used(digest, now_us())
        except StorageError as exc:
            log.warning("key_use_not_noted", error=exc.message)


def state(request: Request) -> AppState:
    """The :class:`AppState` of the app serving ``request``."""
    st: AppState = request.app.state.telha
    return st
