-- Fair leasing across scopes and per-scope quotas (docs/architecture.md, "Fair leasing";
-- docs/operations.md, "Quotas and rate limits").
--
-- lease_heads: one row per (scope, format) that has had a job, with the time of its last
-- lease (µs). A lease takes the head with the oldest last lease that has an available
-- pending job, then that scope's oldest job through jobs_fair; it reads one row per head,
-- never the backlog. Rows are written by enqueue (telha.storage.jobs.fair_lease) and never
-- removed, so a job that goes back to pending always has its head.
CREATE TABLE lease_heads (
    scope_id       INTEGER NOT NULL,
    format         TEXT NOT NULL,
    last_leased_at INTEGER NOT NULL,   -- µs; 0: never leased
    PRIMARY KEY (scope_id, format)
) WITHOUT ROWID;
CREATE INDEX lease_heads_order ON lease_heads (format, last_leased_at, scope_id);
INSERT INTO lease_heads (scope_id, format, last_leased_at)
    SELECT DISTINCT scope_id, format, 0 FROM jobs WHERE state IN ('pending', 'leased');
CREATE INDEX jobs_fair ON jobs (scope_id, format, available_at, job_id) WHERE state = 'pending';

-- Per-scope overrides of the [quotas] defaults (`telha scope set`): one row per key set.
CREATE TABLE scope_limits (
    scope_id INTEGER NOT NULL,
    key      TEXT NOT NULL,      -- max_pending_jobs, max_stored_bytes, requests_per_second, burst
    value    REAL NOT NULL,      -- 0: unlimited
    PRIMARY KEY (scope_id, key)
) WITHOUT ROWID;

-- Bytes stored per scope (raw uploads + canonical text chunks), kept by the triggers below in
-- the transaction that writes, rewrites or deletes the bytes. `shard` spreads the counter
-- over writers on PostgreSQL (its backend pid) so two transactions never wait on one row;
-- SQLite has one writer: shard 0. A scope's usage is the sum of its shards.
CREATE TABLE scope_usage (
    scope_id     INTEGER NOT NULL,
    shard        INTEGER NOT NULL,
    stored_bytes INTEGER NOT NULL,
    PRIMARY KEY (scope_id, shard)
) WITHOUT ROWID;
INSERT INTO scope_usage (scope_id, shard, stored_bytes)
    SELECT scope_id, 0, sum(n) FROM (
        SELECT scope_id, length(data) AS n FROM blob_chunks
        UNION ALL SELECT scope_id, length(data) FROM raw_chunks
    ) GROUP BY scope_id;

-- This migration's triggers (scope_usage kept by the chunk tables) now live in
-- telha/storage/sqlite/functions.sql, which the migrator applies after the migrations on
-- every migrate: a migration holds tables and data only.
