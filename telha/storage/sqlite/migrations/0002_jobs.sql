-- The job queue (docs/architecture.md, "A job's life and its lease"): job rows and their append-only event lists.
CREATE TABLE jobs (
    job_id           BLOB PRIMARY KEY,   -- uuid7, 16 bytes
    scope_id         INTEGER NOT NULL,
    kind             TEXT NOT NULL,      -- "ingest:{format}"
    format           TEXT NOT NULL,
    source_id        BLOB NOT NULL,
    content_hash     BLOB,               -- NULL for fetch formats (web)
    payload          BLOB NOT NULL,      -- IngestJobPayload JSON (docs/worker-protocol.md)
    state            TEXT NOT NULL CHECK (state IN ('pending', 'leased', 'completed', 'dead')),
    attempts         INTEGER NOT NULL DEFAULT 0,   -- failed attempts so far
    lease_generation INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_deadline   INTEGER,            -- µs
    available_at     INTEGER NOT NULL,   -- µs; a pending job is not leased before
    failure_reason   TEXT,
    stats            BLOB,               -- JSON from the worker's submission
    continuation     BLOB,               -- streaming checkpoint (a later migration's concern)
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX jobs_pending ON jobs (format, available_at, job_id) WHERE state = 'pending';
CREATE INDEX jobs_leased ON jobs (lease_deadline) WHERE state = 'leased';
CREATE INDEX jobs_active_source ON jobs (scope_id, source_id, content_hash)
    WHERE state IN ('pending', 'leased');

CREATE TABLE job_events (
    job_id     BLOB NOT NULL,
    seq        INTEGER NOT NULL,
    at         INTEGER NOT NULL,         -- µs
    transition TEXT NOT NULL,            -- enqueued, leased, partial, retried, lease_expired, ...
    detail     TEXT,
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
