-- Telha schema, version 1 (docs/architecture.md). Times are microseconds since the Unix epoch.
-- Every row carries its scope (a (tenant, organization) pair interned in `scopes`).

CREATE TABLE scopes (
    scope_id        INTEGER PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    organization_id TEXT NOT NULL,
    UNIQUE (tenant_id, organization_id)
);

CREATE TABLE api_keys (
    key_hash   BLOB PRIMARY KEY,          -- BLAKE3 of the key; the key itself is never stored
    key_id     TEXT NOT NULL UNIQUE,
    scope_id   INTEGER NOT NULL REFERENCES scopes (scope_id),
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) WITHOUT ROWID;

-- One row per source version (telha.domain.model.SourceVersion); append-only.
CREATE TABLE source_versions (
    scope_id            INTEGER NOT NULL,
    source_id           BLOB NOT NULL,    -- 16 bytes
    tx                  INTEGER NOT NULL, -- transaction time of the version
    name                TEXT NOT NULL,
    format              TEXT NOT NULL,
    content_hash        BLOB NOT NULL,    -- BLAKE3 of the raw bytes, 32 bytes
    canonical_text_hash BLOB,             -- BLAKE3 of the canonical text; NULL until final
    size                INTEGER NOT NULL, -- raw bytes
    worker              TEXT,
    job_id              BLOB,
    blob_id             BLOB,             -- canonical text chunks
    text_len            INTEGER,          -- canonical text length in bytes
    PRIMARY KEY (scope_id, source_id, tx)
) WITHOUT ROWID;

-- Canonical text in chunks of exactly 1 MiB (the last one shorter), shared by equal text.
CREATE TABLE blob_chunks (
    scope_id INTEGER NOT NULL,
    blob_id  BLOB NOT NULL,
    idx      INTEGER NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (scope_id, blob_id, idx)
);

-- Versioned nodes: one row per version; the current version has tx_to NULL.
CREATE TABLE nodes (
    scope_id   INTEGER NOT NULL,
    node_id    BLOB NOT NULL,
    tx_from    INTEGER NOT NULL,
    tx_to      INTEGER,
    valid_from INTEGER,
    valid_to   INTEGER,
    labels     TEXT NOT NULL,             -- JSON array of strings
    properties BLOB NOT NULL,             -- JSON object
    provenance BLOB NOT NULL,             -- JSON [[start, end], ...] into (source_id, tx_from)
    source_id  BLOB,                      -- the source whose version wrote this node version
    PRIMARY KEY (scope_id, node_id, tx_from)
) WITHOUT ROWID;
CREATE INDEX nodes_by_source ON nodes (scope_id, source_id, node_id) WHERE tx_to IS NULL;

CREATE TABLE node_labels (
    scope_id INTEGER NOT NULL,
    label    TEXT NOT NULL,
    node_id  BLOB NOT NULL,
    tx_from  INTEGER NOT NULL,
    PRIMARY KEY (scope_id, label, node_id, tx_from)
) WITHOUT ROWID;

-- Edges: endpoints are not checked at write; reads drop edges with a missing endpoint.
CREATE TABLE edges (
    scope_id   INTEGER NOT NULL,
    edge_id    BLOB NOT NULL,
    tx_from    INTEGER NOT NULL,
    tx_to      INTEGER,
    type       TEXT NOT NULL,
    from_id    BLOB NOT NULL,
    to_id      BLOB NOT NULL,
    properties BLOB NOT NULL,
    PRIMARY KEY (scope_id, edge_id, tx_from)
) WITHOUT ROWID;
CREATE INDEX edges_from ON edges (scope_id, from_id) WHERE tx_to IS NULL;
CREATE INDEX edges_to ON edges (scope_id, to_id) WHERE tx_to IS NULL;

-- The span reverse index (telha.domain.model.SpanRecord), in document order per source version.
CREATE TABLE span_rows (
    scope_id          INTEGER NOT NULL,
    source_id         BLOB NOT NULL,
    source_version_tx INTEGER NOT NULL,
    start             INTEGER NOT NULL,
    "end"             INTEGER NOT NULL,
    kind              TEXT NOT NULL,
    linked_nodes      BLOB NOT NULL,      -- concatenated 16-byte node ids
    PRIMARY KEY (scope_id, source_id, source_version_tx, start, "end")
) WITHOUT ROWID;
