-- Fair leasing across scopes and per-scope quotas (docs/architecture.md, "Fair leasing";
-- docs/operations.md, "Quotas and rate limits"). See the SQLite migration of the same number
-- for the tables; here the counter's shard is the writing backend's pid, so two
-- transactions adding bytes to one scope never wait on one row.
CREATE TABLE lease_heads (
    scope_id       integer NOT NULL,
    format         text NOT NULL,
    last_leased_at bigint NOT NULL,   -- µs; 0: never leased
    PRIMARY KEY (scope_id, format)
);
CREATE INDEX lease_heads_order ON lease_heads (format, last_leased_at, scope_id);
INSERT INTO lease_heads (scope_id, format, last_leased_at)
    SELECT DISTINCT scope_id, format, 0 FROM jobs WHERE state IN ('pending', 'leased');
CREATE INDEX jobs_fair ON jobs (scope_id, format, available_at, job_id) WHERE state = 'pending';

CREATE TABLE scope_limits (
    scope_id integer NOT NULL,
    key      text NOT NULL,
    value    double precision NOT NULL,   -- 0: unlimited
    PRIMARY KEY (scope_id, key)
);

CREATE TABLE scope_usage (
    scope_id     integer NOT NULL,
    shard        integer NOT NULL,
    stored_bytes bigint NOT NULL,
    PRIMARY KEY (scope_id, shard)
);
INSERT INTO scope_usage (scope_id, shard, stored_bytes)
    SELECT scope_id, 0, sum(n) FROM (
        SELECT scope_id, octet_length(data) AS n FROM blob_chunks
        UNION ALL SELECT scope_id, octet_length(data) FROM raw_chunks
    ) AS b GROUP BY scope_id;

-- This migration's trigger (telha_usage: scope_usage kept by the chunk tables) and
-- telha_enqueue's lease head now live in telha/storage/postgres/functions.sql, which the
-- migrator applies after the migrations on every migrate: a migration holds tables and data
-- only.
