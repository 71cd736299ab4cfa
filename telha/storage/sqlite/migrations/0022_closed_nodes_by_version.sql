-- A version's node rows are found through two partial indexes (docs/architecture.md, "A
-- version's rows"): its open rows through nodes_by_source, its closed rows through this one.
-- A source's first version, all of whose rows are open, so enters no by-version index (a
-- large share of a big first ingest's commit). A statement that reads all of a version's
-- rows runs once per half (the SQLite dialect's version_halves). Its statistics are those of the
-- full index it replaces, so a query that read a source's rows in id order still does.
DROP INDEX nodes_by_version;
CREATE INDEX closed_nodes_by_version ON nodes (scope_id, source_id, tx_from)
    WHERE tx_to IS NOT NULL;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('nodes', 'closed_nodes_by_version', '1000000 1000000 100000 1000');
ANALYZE sqlite_schema;
