-- A scope's full-text index rows are numbered from the top of its rowid range down, the
-- newest lowest (telha.domain.search_query.scope_rowids; docs/architecture.md, "Search"):
-- FTS5 reads a doclist forward at its cheapest, and the rank window takes a query's newest
-- matches first. The rows numbered the old way (oldest lowest) are dropped with their
-- waiting work and `search_state` says the index is not built: the next start with
-- `[search] enabled` queues every current version and the search indexer writes both
-- indexes again while the service serves (progress in the log: search_index_rebuild), as
-- the folding change did (0027).
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
INSERT INTO search_tri (search_tri) VALUES ('delete-all');
DELETE FROM search_spans;
DELETE FROM search_sources;
DELETE FROM search_stale;
UPDATE search_state SET enabled = 0 WHERE id = 1;
