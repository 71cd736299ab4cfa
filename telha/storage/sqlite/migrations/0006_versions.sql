-- Versions that supersede (docs/architecture.md, "Versions and node identity").
--
-- A version is published when it becomes the source's current graph: at its commit (single
-- shot) or at its stream's finalize. Until then its rows are invisible to every read; a
-- stream abandoned never publishes. Reads at time t see a row only if the version that wrote
-- it (if any) was published at or before t.
ALTER TABLE source_versions ADD COLUMN published_tx INTEGER;   -- µs; NULL: not published
UPDATE source_versions SET published_tx = tx WHERE canonical_text_hash IS NOT NULL;
-- A retired source: the version current when it was retired records when and why.
ALTER TABLE source_versions ADD COLUMN retired_tx INTEGER;
ALTER TABLE source_versions ADD COLUMN retire_reason TEXT;
-- The version's root node (DOCUMENT, TABLE, WORKBOOK, MESSAGE or FILE), and what its publish
-- changed: JSON {"nodes_added": …, "nodes_removed": …, "nodes_changed": …, "nodes_unchanged": …}.
ALTER TABLE source_versions ADD COLUMN root_node_id BLOB;
ALTER TABLE source_versions ADD COLUMN changes BLOB;
CREATE INDEX source_versions_by_tx ON source_versions (scope_id, tx);

-- A node version's identity key (telha.domain.identity): labels and content; NULL for a
-- worker-supplied id and for rows written before this migration.
ALTER TABLE nodes ADD COLUMN match_key BLOB;
CREATE INDEX nodes_by_key ON nodes (scope_id, source_id, match_key) WHERE tx_to IS NULL;
CREATE INDEX nodes_by_version ON nodes (scope_id, source_id, tx_from);

-- Every edge row carries the source whose version wrote it, as node rows do.
ALTER TABLE edges ADD COLUMN source_id BLOB;
UPDATE edges SET source_id = (
    SELECT v.source_id FROM source_versions v
    WHERE v.scope_id = edges.scope_id AND v.tx = edges.tx_from
);
CREATE INDEX edges_by_source ON edges (scope_id, source_id) WHERE tx_to IS NULL;

-- Planner statistics for the graph tables. Without them SQLite assumes an equality on an
-- index's first column is selective, so `scope_id = ?` on a table's primary key beats every
-- partial index (a search of the whole scope per probe). These figures describe the shape
-- every store has — one scope holds most rows; a source has many rows, a node id few — and
-- a later ANALYZE replaces them with measured ones. `ANALYZE scopes` creates sqlite_stat1.
ANALYZE scopes;
DELETE FROM sqlite_stat1 WHERE tbl IN ('nodes', 'edges');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('nodes', 'nodes', '1000000 1000000 2 1'),
    ('nodes', 'nodes_by_source', '1000000 1000000 1000 1'),
    ('nodes', 'nodes_by_key', '1000000 1000000 1000 1'),
    ('nodes', 'nodes_by_version', '1000000 1000000 100000 1000'),
    ('edges', 'edges', '1000000 1000000 2 1'),
    ('edges', 'edges_from', '1000000 1000000 4'),
    ('edges', 'edges_to', '1000000 1000000 4'),
    ('edges', 'edges_by_tx', '1000000 1000000 1000'),
    ('edges', 'edges_by_source', '1000000 1000000 1000');
ANALYZE sqlite_schema;
