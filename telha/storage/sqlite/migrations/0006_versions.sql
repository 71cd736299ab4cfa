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

-- Stores written before this migration kept every version's graph current. Each source's
-- latest published version now supersedes its earlier ones at its own tx: their node rows and
-- edges are closed there. A node with a worker-supplied id (not a uuid7) that the latest
-- version's span rows link was that version's too (the old upsert ladder wrote no row for
-- an unchanged one): it gets a version at the latest tx with the latest version's spans.
CREATE TEMP TABLE legacy_latest AS
    SELECT scope_id, source_id, max(tx) AS tx FROM source_versions
    WHERE published_tx IS NOT NULL GROUP BY scope_id, source_id;
CREATE TEMP TABLE legacy_rows AS
    SELECT n.scope_id, n.node_id, n.tx_from, n.source_id, l.tx AS latest
    FROM nodes n JOIN legacy_latest l ON l.scope_id = n.scope_id AND l.source_id = n.source_id
    WHERE n.tx_to IS NULL AND n.tx_from < l.tx AND NOT n.erased;
CREATE TEMP TABLE legacy_links AS
    SELECT r.scope_id, r.node_id, r.tx_from, r.latest,
           '[' || group_concat('[' || s.start || ',' || s."end" || ']', ',') || ']' AS prov
    FROM legacy_rows r JOIN span_rows s ON s.scope_id = r.scope_id
        AND s.source_id = r.source_id AND s.source_version_tx = r.latest
        AND instr(s.linked_nodes, r.node_id) > 0
    WHERE substr(hex(r.node_id), 13, 1) <> '7'
    GROUP BY r.scope_id, r.node_id, r.tx_from, r.latest;
UPDATE nodes SET tx_to = (
    SELECT r.latest FROM legacy_rows r WHERE r.scope_id = nodes.scope_id
        AND r.node_id = nodes.node_id AND r.tx_from = nodes.tx_from
) WHERE tx_to IS NULL AND EXISTS (
    SELECT 1 FROM legacy_rows r WHERE r.scope_id = nodes.scope_id
        AND r.node_id = nodes.node_id AND r.tx_from = nodes.tx_from
);
INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance, source_id,
                   valid_from, valid_to)
    SELECT n.scope_id, n.node_id, k.latest, n.labels, n.properties, CAST(k.prov AS BLOB),
           n.source_id, n.valid_from, n.valid_to
    FROM legacy_links k JOIN nodes n ON n.scope_id = k.scope_id AND n.node_id = k.node_id
        AND n.tx_from = k.tx_from;
INSERT OR IGNORE INTO node_labels (scope_id, label, node_id, tx_from)
    SELECT l.scope_id, l.label, l.node_id, k.latest
    FROM legacy_links k JOIN node_labels l ON l.scope_id = k.scope_id
        AND l.node_id = k.node_id AND l.tx_from = k.tx_from;
UPDATE edges SET tx_to = (
    SELECT l.tx FROM legacy_latest l WHERE l.scope_id = edges.scope_id
        AND l.source_id = edges.source_id
) WHERE tx_to IS NULL AND tx_from < (
    SELECT l.tx FROM legacy_latest l WHERE l.scope_id = edges.scope_id
        AND l.source_id = edges.source_id
);
DROP TABLE legacy_links;
DROP TABLE legacy_rows;
DROP TABLE legacy_latest;

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
