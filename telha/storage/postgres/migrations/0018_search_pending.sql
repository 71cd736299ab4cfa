-- The full-text index is filled after the commit that publishes a version (docs/architecture.md,
-- "Search"): that commit deletes the rows of versions no longer current and queues the new
-- current version here; the search indexer (telha.search_indexer) writes its rows a batch of
-- span rows per transaction, and a search or locate first indexes what its scope has queued.
-- `last_start`/`last_end`: the span rows up to that key (in (start, end) order) are indexed;
-- (-1, -1) before the first batch.
CREATE TABLE search_pending (
    scope_id   integer NOT NULL,
    source_id  bytea NOT NULL,
    version_tx bigint NOT NULL,             -- µs: the version being indexed
    last_start bigint NOT NULL,
    last_end   bigint NOT NULL,
    PRIMARY KEY (scope_id, source_id)
);
CREATE INDEX search_pending_by_age ON search_pending (version_tx);
CREATE INDEX search_pending_by_scope ON search_pending (scope_id, version_tx);
