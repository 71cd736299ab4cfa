-- Telha on PostgreSQL, schema version 1 (docs/architecture.md, "The storage seam"): the tables of the SQLite engine's
-- migrations 1–4 with PostgreSQL types. Times are microseconds since the Unix epoch (bigint);
-- ids and hashes are bytea (16 and 32 bytes). Every row carries its scope (a (tenant,
-- organization) pair interned in `scopes`).

CREATE TABLE scopes (
    scope_id        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text NOT NULL,
    organization_id text NOT NULL,
    UNIQUE (tenant_id, organization_id)
);

-- Transaction time (µs), strictly increasing across every replica: each writing transaction
-- takes the next value with `UPDATE tx_clock ... RETURNING tx`, and the row lock it holds until
-- commit orders commits by tx.
CREATE TABLE tx_clock (
    id integer PRIMARY KEY CHECK (id = 1),
    tx bigint NOT NULL
);
INSERT INTO tx_clock VALUES (1, 0);

CREATE TABLE api_keys (
    key_hash   bytea PRIMARY KEY,          -- BLAKE3 of the key; the key itself is never stored
    key_id     text NOT NULL UNIQUE,
    scope_id   integer NOT NULL REFERENCES scopes (scope_id),
    created_at bigint NOT NULL,
    revoked_at bigint
);

-- One row per source version (telha.domain.model.SourceVersion); append-only.
CREATE TABLE source_versions (
    scope_id            integer NOT NULL,
    source_id           bytea NOT NULL,
    tx                  bigint NOT NULL,
    name                text NOT NULL,
    format              text NOT NULL,
    content_hash        bytea NOT NULL,
    canonical_text_hash bytea,            -- NULL until final
    size                bigint NOT NULL,  -- raw bytes
    worker              text,
    job_id              bytea,
    blob_id             bytea,
    text_len            bigint,           -- canonical text length in bytes
    PRIMARY KEY (scope_id, source_id, tx)
);

-- Canonical text in chunks of exactly 1 MiB (the last one shorter), shared by equal text.
CREATE TABLE blob_chunks (
    scope_id integer NOT NULL,
    blob_id  bytea NOT NULL,
    idx      integer NOT NULL,
    data     bytea NOT NULL,
    PRIMARY KEY (scope_id, blob_id, idx)
);
-- Uncompressed out-of-line storage: slices and single bytes are read without decompressing.
ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- Versioned nodes: one row per version; the current version has tx_to NULL. labels and
-- properties hold the exact JSON text the upsert ladder compares.
CREATE TABLE nodes (
    scope_id   integer NOT NULL,
    node_id    bytea NOT NULL,
    tx_from    bigint NOT NULL,
    tx_to      bigint,
    valid_from bigint,
    valid_to   bigint,
    labels     text NOT NULL,             -- JSON array of strings
    properties bytea NOT NULL,            -- JSON object
    provenance bytea NOT NULL,            -- JSON [[start, end], ...] into (source_id, tx_from)
    source_id  bytea,
    PRIMARY KEY (scope_id, node_id, tx_from)
);
CREATE INDEX nodes_current ON nodes (scope_id, node_id) WHERE tx_to IS NULL;
CREATE INDEX nodes_by_source ON nodes (scope_id, source_id, node_id) WHERE tx_to IS NULL;
CREATE INDEX nodes_by_source_tx ON nodes (scope_id, source_id, tx_from);
CREATE INDEX nodes_by_tx_to ON nodes (scope_id, tx_to) WHERE tx_to IS NOT NULL;

CREATE TABLE node_labels (
    scope_id integer NOT NULL,
    label    text NOT NULL,
    node_id  bytea NOT NULL,
    tx_from  bigint NOT NULL,
    PRIMARY KEY (scope_id, label, node_id, tx_from)
);

-- Edges: endpoints are not checked at write; reads drop edges with a missing endpoint.
CREATE TABLE edges (
    scope_id   integer NOT NULL,
    edge_id    bytea NOT NULL,
    tx_from    bigint NOT NULL,
    tx_to      bigint,
    type       text NOT NULL,
    from_id    bytea NOT NULL,
    to_id      bytea NOT NULL,
    properties bytea NOT NULL,
    PRIMARY KEY (scope_id, edge_id, tx_from)
);
CREATE INDEX edges_from ON edges (scope_id, from_id) WHERE tx_to IS NULL;
CREATE INDEX edges_to ON edges (scope_id, to_id) WHERE tx_to IS NULL;
CREATE INDEX edges_by_tx ON edges (scope_id, tx_from);

-- The span reverse index (telha.domain.model.SpanRecord), in document order per source version.
CREATE TABLE span_rows (
    scope_id          integer NOT NULL,
    source_id         bytea NOT NULL,
    source_version_tx bigint NOT NULL,
    start             bigint NOT NULL,
    "end"             bigint NOT NULL,
    kind              text NOT NULL,
    linked_nodes      bytea NOT NULL,     -- concatenated 16-byte node ids
    PRIMARY KEY (scope_id, source_id, source_version_tx, start, "end")
);

-- The job queue (docs/architecture.md, "A job's life and its lease"): job rows and their append-only event lists.
CREATE TABLE jobs (
    job_id           bytea PRIMARY KEY,
    scope_id         integer NOT NULL,
    kind             text NOT NULL,
    format           text NOT NULL,
    source_id        bytea NOT NULL,
    content_hash     bytea,
    payload          bytea NOT NULL,
    state            text NOT NULL CHECK (state IN ('pending', 'leased', 'completed', 'dead')),
    attempts         integer NOT NULL DEFAULT 0,
    lease_generation integer NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_deadline   bigint,
    available_at     bigint NOT NULL,
    failure_reason   text,
    stats            bytea,
    continuation     bytea,               -- streaming checkpoint (msgpack IngestContinuation)
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL
);
CREATE INDEX jobs_pending ON jobs (format, available_at, job_id) WHERE state = 'pending';
CREATE INDEX jobs_leased ON jobs (lease_deadline) WHERE state = 'leased';
CREATE INDEX jobs_active_source ON jobs (scope_id, source_id, content_hash)
    WHERE state IN ('pending', 'leased');

CREATE TABLE job_events (
    job_id     bytea NOT NULL,
    seq        integer NOT NULL,
    at         bigint NOT NULL,
    transition text NOT NULL,
    detail     text,
    PRIMARY KEY (job_id, seq)
);

-- Raw uploaded bytes, content-addressed per scope (docs/formats.md, "Large files"), in chunks of exactly 1 MiB.
CREATE TABLE raw_blobs (
    scope_id     integer NOT NULL,
    content_hash bytea NOT NULL,
    size         bigint NOT NULL,
    complete     boolean NOT NULL DEFAULT false,
    created_at   bigint NOT NULL,
    PRIMARY KEY (scope_id, content_hash)
);

CREATE TABLE raw_chunks (
    scope_id     integer NOT NULL,
    content_hash bytea NOT NULL,
    idx          integer NOT NULL,
    data         bytea NOT NULL,
    PRIMARY KEY (scope_id, content_hash, idx)
);
ALTER TABLE raw_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- Temporal ambiguities a worker detected (docs/formats.md, "Temporal ambiguity"), one per node version.
CREATE TABLE ambiguities (
    scope_id                     integer NOT NULL,
    node_id                      bytea NOT NULL,
    tx                           bigint NOT NULL,
    source_id                    bytea NOT NULL,
    kind                         text NOT NULL,
    candidates                   bytea NOT NULL,
    detector_confidence          double precision,
    applied_candidate_confidence double precision,
    severity_hint                text,
    PRIMARY KEY (scope_id, node_id, tx)
);
