-- The match key index keeps the rows a later version closes (docs/architecture.md, "Versions
-- and node identity"). Partial on `tx_to IS NULL`, every supersede removed each closed row's
-- entry from a randomly-keyed index; now closing a row leaves its entry, and a probe reads
-- `tx_to` from the row it already fetches. Its planner statistics count every version's rows
-- and nodes_by_source's only the current ones (half of them), so a read of a source's
-- current rows keeps nodes_by_source.
DROP INDEX nodes_by_key;
CREATE INDEX nodes_by_key ON nodes (scope_id, source_id, match_key);
DELETE FROM sqlite_stat1 WHERE tbl = 'nodes' AND idx IN ('nodes_by_key', 'nodes_by_source');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('nodes', 'nodes_by_key', '1000000 1000000 1000 2'),
    ('nodes', 'nodes_by_source', '500000 500000 500 1');
ANALYZE sqlite_schema;
