"""How each engine's store is composed (telha/storage/core/operations.py): every aggregate
is a component, an attribute made once over the store (PostgreSQL's job and version
aggregates: the subclasses with its fast paths), never a mixin: the store's classes are its
engine's store, the shared operations, the engine's base and the runners' base."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import pytest

from telha.storage.connectors.aggregate import Connectors
from telha.storage.core.engine import EngineOps
from telha.storage.core.operations import SharedOps
from telha.storage.erasure.aggregate import Erasure
from telha.storage.jobs.aggregate import Jobs
from telha.storage.keys.aggregate import Keys
from telha.storage.listings.aggregate import Listings
from telha.storage.postgres.base import PgBase
from telha.storage.postgres.fast import FastJobs, FastVersions
from telha.storage.postgres.store import PostgresStore
from telha.storage.quotas.aggregate import StoreQuotas
from telha.storage.raw.aggregate import Raw
from telha.storage.reads.aggregate import Reads
from telha.storage.retention.aggregate import StoreRetention
from telha.storage.search.aggregate import Search
from telha.storage.sqlite.base import SqliteBase
from telha.storage.sqlite.store import SqliteStore
from telha.storage.versions.aggregate import Versions
from telha.storage.webhooks.aggregate import Webhooks


@pytest.mark.parametrize(("store", "base"), [(PostgresStore, PgBase), (SqliteStore, SqliteBase)])
def test_a_store_inherits_no_operation_mixin(store: type, base: type) -> None:
    assert store.__mro__ == (store, SharedOps, base, EngineOps, object)


#: The aggregates a store composes rather than inherits, with the flat store methods they
#: replaced (none may come back beside the component).
COMPOSED = {
    "jobs": (
        Jobs,
        ("enqueue_job", "lease_next_job", "next_available_at", "active_job_counts",
         "heartbeat_jobs", "fail_job", "release_job", "reap_expired", "lose_jobs", "get_job",
         "cancel_job", "lease_states", "job_events_after"),
    ),
    "versions": (
        Versions,
        ("latest_version", "commit_version", "stream_base", "apply_stream_part",
         "retire_source", "current_versions", "_commit_fast"),
    ),
    "search": (
        Search,
        ("search_page", "locate", "index_queued", "queued_versions", "catch_up",
         "catch_up_s"),
    ),
    "reads": (
        Reads,
        ("source_versions", "read_text", "span_rows", "get_node", "list_nodes", "node_edges",
         "source_admitted", "chunk_inputs", "text_window", "version_diff", "has_source"),
    ),
    "listings": (
        Listings,
        ("list_sources", "source_summary", "list_jobs", "job_family", "version_parents"),
    ),
    "raw": (Raw, ("has_raw", "store_raw", "read_raw")),
    "erasure": (
        Erasure,
        ("enqueue_erasure", "erase_step", "erasure_preview", "erasure_leftovers",
         "_erasure_finished"),
    ),
    "retention": (StoreRetention, ("remove_ended_jobs", "_blobs", "_remove_blob")),
    "keys": (
        Keys,
        ("insert_api_key", "scope_for_key", "key_access", "list_api_keys", "revoke_api_key",
         "api_key_used"),
    ),
    "webhooks": (
        Webhooks,
        ("add_webhook", "remove_webhook", "list_webhooks", "rotate_webhook_secret",
         "has_webhook_secret", "claim_deliveries", "finish_deliveries", "delivery_times",
         "pending_deliveries"),
    ),
    "connectors": (
        Connectors,
        ("add_connector", "list_connectors", "get_connector", "remove_connector",
         "record_connector_item", "find_connector_item", "connector_items", "start_sync_run",
         "scheduled_connectors", "apply_sync_page", "sync_runs"),
    ),
    "quotas": (
        StoreQuotas,
        ("scope_limits", "set_scope_limit", "pending_jobs", "stored_bytes",
         "total_stored_bytes"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("store", [PostgresStore, SqliteStore])
def test_composed_aggregates_are_components_not_methods(store: type) -> None:
    for name, (_, flat) in COMPOSED.items():
        assert isinstance(vars(SharedOps)[name], cached_property), name
        assert [m for m in flat if hasattr(store, m)] == [], name


def test_postgres_composes_its_fast_paths() -> None:
    """PostgreSQL's store composes the job and version aggregates' fast-path subclasses."""
    store = PostgresStore("postgresql://never-opened.invalid/telha")
    assert isinstance(store.jobs, FastJobs) and store.jobs._engine is store
    assert isinstance(store.versions, FastVersions) and store.versions._engine is store
    assert FastJobs.enqueue is not Jobs.enqueue and FastJobs.lease_next is not Jobs.lease_next
    assert FastVersions._commit_fast is not Versions._commit_fast
    sqlite = SqliteStore(Path("never-opened.db"))
    assert type(sqlite.jobs) is Jobs and type(sqlite.versions) is Versions


def test_a_component_is_made_once_over_its_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "never-opened.db")
    for name, (component, _) in COMPOSED.items():
        made = getattr(store, name)
        assert isinstance(made, component) and made._engine is store
        assert getattr(store, name) is made
