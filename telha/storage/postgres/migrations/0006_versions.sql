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
