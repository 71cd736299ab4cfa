-- Connectors (docs/connectors.md): a scope's registered connectors, and what each one
-- created. Connector facts live in their own tables, keyed (scope, connector, external id)
-- -> source id, so source_versions and the dedup rule stay as they are.
CREATE TABLE connectors (
    connector_id       BLOB PRIMARY KEY,     -- uuid7
    scope_id           INTEGER NOT NULL,
    kind               TEXT NOT NULL,        -- folder, ...
    settings           TEXT NOT NULL,        -- JSON object, checked by the kind
    every_s            INTEGER,              -- schedule; NULL: runs only when started
    prune_max_fraction REAL NOT NULL,
    created_at         INTEGER NOT NULL,     -- µs
    removed_at         INTEGER               -- µs; a removed connector keeps its rows
) WITHOUT ROWID;
CREATE INDEX connectors_by_scope ON connectors (scope_id, connector_id);

-- One row per item a connector created a source for. `source_id` derives from
-- (connector, tenant, external id) (docs/architecture.md, "Identity"); `marker` is the
-- item's change marker (etag, or modified time and size) as last ingested; `acl` the
-- principals as JSON (stored, advisory); `retired_at` set when the connector retired it.
CREATE TABLE connector_items (
    scope_id     INTEGER NOT NULL,
    connector_id BLOB NOT NULL,
    external_id  TEXT NOT NULL,
    source_id    BLOB NOT NULL,
    name         TEXT NOT NULL,
    marker       TEXT,
    modified_us  INTEGER,
    size         INTEGER,
    acl          TEXT,
    updated_at   INTEGER NOT NULL,           -- µs
    retired_at   INTEGER,                    -- µs
    PRIMARY KEY (scope_id, connector_id, external_id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX connector_items_by_source ON connector_items (scope_id, source_id);
