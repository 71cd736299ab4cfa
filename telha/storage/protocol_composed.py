"""The aggregates a store composes rather than inherits (docs/architecture.md, "The storage
seam"): each an attribute of the store typed by its role, made once over the store's
runners (:class:`~telha.storage.core.operations.SharedOps`)."""

from __future__ import annotations

from typing import Protocol

from telha.storage.connectors.role import ConnectorStore
from telha.storage.erasure.role import ErasureStore
from telha.storage.jobs.role import JobStore
from telha.storage.keys.role import KeyStore
from telha.storage.listings.role import ListStore
from telha.storage.quotas.role import QuotaStore
from telha.storage.raw.role import RawStore
from telha.storage.reads.role import ReadStore
from telha.storage.retention.role import RetentionStore
from telha.storage.search.role import SearchStore
from telha.storage.versions.role import VersionStore
from telha.storage.webhooks.role import WebhookStore

__all__ = ["ComposedAggregates"]


class ComposedAggregates(Protocol):
    """Every aggregate of a store, ``store.<name>`` (docs/architecture.md, "The storage
    seam")."""

    @property
    def connectors(self) -> ConnectorStore:
        """Registered connectors, their items and sync runs."""

    @property
    def erasure(self) -> ErasureStore:
        """GDPR erasure: the erase job, its steps, its preview and leftovers."""

    @property
    def jobs(self) -> JobStore:
        """Job rows: enqueue, lease, heartbeat, fail, release, lose, reap, cancel."""

    @property
    def keys(self) -> KeyStore:
        """REST API keys: minted, looked up, listed, revoked."""

    @property
    def listings(self) -> ListStore:
        """The listings: a scope's sources and jobs, newest first."""

    @property
    def quotas(self) -> QuotaStore:
        """Per-scope limits and usage."""

    @property
    def raw(self) -> RawStore:
        """Raw uploaded bytes: stored, streamed back."""

    @property
    def reads(self) -> ReadStore:
        """Reads of what was ingested: versions, text, spans, nodes, edges, chunks, diffs."""

    @property
    def retention(self) -> RetentionStore:
        """Job retention: ended jobs and unnamed raw uploads removed."""

    @property
    def search(self) -> SearchStore:
        """Full-text search, quote location and the index's writer."""

    @property
    def versions(self) -> VersionStore:
        """Source versions: latest, commit, streamed parts, retire, the current ones."""

    @property
    def webhooks(self) -> WebhookStore:
        """Webhook subscriptions, signing secrets and deliveries."""
