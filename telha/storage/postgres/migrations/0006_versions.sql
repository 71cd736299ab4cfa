-- Versions that supersede (docs/architecture.md, "Versions and node identity"), the
-- columns and indexes of the SQLite engine's migration 6. A version is published when it
-- becomes its source's current graph; until then its rows are invisible to every read.
ALTER TABLE source_versions ADD COLUMN published_tx bigint;   -- µs; NULL: not published
UPDATE source_versions SET published_tx = tx WHERE canonical_text_hash IS NOT NULL;
ALTER TABLE source_versions ADD COLUMN retired_tx bigint;
ALTER TABLE source_versions ADD COLUMN retire_reason text;
ALTER TABLE source_versions ADD COLUMN root_node_id bytea;
ALTER TABLE source_versions ADD COLUMN changes bytea;
CREATE INDEX source_versions_by_tx ON source_versions (scope_id, tx);

ALTER TABLE nodes ADD COLUMN match_key bytea;
CREATE INDEX nodes_by_key ON nodes (scope_id, source_id, match_key) WHERE tx_to IS NULL;

ALTER TABLE edges ADD COLUMN source_id bytea;
UPDATE edges e SET source_id = v.source_id FROM source_versions v
    WHERE v.scope_id = e.scope_id AND v.tx = e.tx_from;
CREATE INDEX edges_by_source ON edges (scope_id, source_id) WHERE tx_to IS NULL;

-- Stores written before this migration kept every version's graph current; as the SQLite
-- engine's migration 6, each source's latest published version now supersedes its earlier
-- ones at its own tx, and a worker-id node (not a uuid7) its span rows link gets a version there.
CREATE TEMP TABLE legacy_latest AS
    SELECT scope_id, source_id, max(tx) AS tx FROM source_versions
    WHERE published_tx IS NOT NULL GROUP BY scope_id, source_id;
CREATE TEMP TABLE legacy_rows AS
    SELECT n.scope_id, n.node_id, n.tx_from, n.source_id, l.tx AS latest
    FROM nodes n JOIN legacy_latest l ON l.scope_id = n.scope_id AND l.source_id = n.source_id
    WHERE n.tx_to IS NULL AND n.tx_from < l.tx AND NOT n.erased;
CREATE TEMP TABLE legacy_links AS
    SELECT r.scope_id, r.node_id, r.tx_from, r.latest,
           convert_to('[' || string_agg('[' || s.start || ',' || s."end" || ']', ','
                                        ORDER BY s.start, s."end") || ']', 'UTF8') AS prov
    FROM legacy_rows r JOIN span_rows s ON s.scope_id = r.scope_id
        AND s.source_id = r.source_id AND s.source_version_tx = r.latest
        AND position(r.node_id IN s.linked_nodes) > 0
    WHERE get_byte(r.node_id, 6) >> 4 <> 7
    GROUP BY r.scope_id, r.node_id, r.tx_from, r.latest;
UPDATE nodes n SET tx_to = r.latest FROM legacy_rows r
    WHERE r.scope_id = n.scope_id AND r.node_id = n.node_id AND r.tx_from = n.tx_from;
INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance, source_id,
                   valid_from, valid_to)
    SELECT n.scope_id, n.node_id, k.latest, n.labels, n.properties, k.prov, n.source_id,
           n.valid_from, n.valid_to
    FROM legacy_links k JOIN nodes n ON n.scope_id = k.scope_id AND n.node_id = k.node_id
        AND n.tx_from = k.tx_from;
INSERT INTO node_labels (scope_id, label, node_id, tx_from)
    SELECT l.scope_id, l.label, l.node_id, k.latest
    FROM legacy_links k JOIN node_labels l ON l.scope_id = k.scope_id
        AND l.node_id = k.node_id AND l.tx_from = k.tx_from
    ON CONFLICT DO NOTHING;
UPDATE edges e SET tx_to = l.tx FROM legacy_latest l
    WHERE l.scope_id = e.scope_id AND l.source_id = e.source_id AND e.tx_to IS NULL
        AND e.tx_from < l.tx;
DROP TABLE legacy_links, legacy_rows, legacy_latest;

-- This migration's functions (the dedup against the latest published version,
-- telha_commit_single's publish) now live in telha/storage/postgres/functions.sql, which the
-- migrator applies after the migrations on every migrate: a migration holds tables and data
-- only.
