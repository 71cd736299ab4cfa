-- Connectors (docs/connectors.md): a scope's registered connectors, and what each one
-- created. Connector facts live in their own tables, keyed (scope, connector, external id)
-- -> source id, so source_versions and the dedup rule stay as they are.
CREATE TABLE connectors (
    connector_id       bytea PRIMARY KEY,     -- uuid7
    scope_id           integer NOT NULL,
    kind               text NOT NULL,        -- folder, ...
    settings           text NOT NULL,        -- JSON object, checked by the kind
    every_s            bigint,              -- schedule; NULL: runs only when started
    prune_max_fraction double precision NOT NULL,
    created_at         bigint NOT NULL,      -- µs
    removed_at         bigint               -- µs; a removed connector keeps its rows
);
CREATE INDEX connectors_by_scope ON connectors (scope_id, connector_id);

-- One row per item a connector created a source for. `source_id` derives from
-- (connector, tenant, external id) (docs/architecture.md, "Identity"); `marker` is the
-- item's change marker (etag, or modified time and size) as last ingested; `acl` the
-- principals as JSON (stored, advisory); `retired_at` set when the connector retired it.
CREATE TABLE connector_items (
    scope_id     integer NOT NULL,
    connector_id bytea NOT NULL,
    external_id  text NOT NULL,
    source_id    bytea NOT NULL,
    name         text NOT NULL,
    marker       text,
    modified_us  bigint,
    size         bigint,
    acl          text,
    updated_at   bigint NOT NULL,           -- µs
    retired_at   bigint,                    -- µs
    PRIMARY KEY (scope_id, connector_id, external_id)
);
CREATE UNIQUE INDEX connector_items_by_source ON connector_items (scope_id, source_id);
