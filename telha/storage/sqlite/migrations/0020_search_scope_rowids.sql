-- Full-text search by rowid range (docs/architecture.md, "Search"): a scope's index rows take
-- rowids in its own range, [scope_id * 2^40, (scope_id + 1) * 2^40)
-- (telha.domain.search_query.scope_rowids), and a search names that range instead of matching
-- a scope token. FTS5's bm25 counts the rows of every phrase of a query, so the scope token
-- (in every row of the scope) cost a count of the whole scope on each search. `search_fts`
-- now indexes `body` alone; the rows written with the old numbering are dropped and
-- `search_state` says the index is not built, so the next start with `[search] enabled`
-- queues every current version and the search indexer writes the index again while the
-- service serves.
DROP TABLE search_fts;
CREATE VIRTUAL TABLE search_fts USING fts5(
    body, content = 'search_spans', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 2'
);
DELETE FROM search_spans;
DELETE FROM search_sources;
DELETE FROM search_stale;
UPDATE search_state SET enabled = 0 WHERE id = 1;
