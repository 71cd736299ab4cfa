-- A substring index beside the word index (docs/architecture.md, "Search"): a quote of one
-- word that may lie inside a longer one (`uffal` in `buffalo`, `국어` in `한국어`) takes its
-- candidates from a `pg_trgm` GIN index over `words`, the span's distinct folded words
-- separated by spaces (the words of `body`), rather than from a scan of the scope's rows.
-- `pg_trgm` is a trusted extension (PostgreSQL 13 on): the database's owner, or any role
-- with CREATE on it, may create it; where that is not allowed the migration stops with the
-- statement an administrator runs once (docs/operations.md, "PostgreSQL").
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN insufficient_privilege OR undefined_file OR feature_not_supported THEN
    RAISE EXCEPTION 'the search index needs the pg_trgm extension: %', SQLERRM
        USING HINT = 'an administrator runs once, in this database: CREATE EXTENSION pg_trgm;'
            ' (Debian and Ubuntu ship it with postgresql; elsewhere install postgresql-contrib)';
END
$$;
-- The rows written before it have no `words`: they are dropped with their waiting work and
-- `search_state` says the index is not built: the next start with `[search] enabled` queues
-- every current version and the search indexer writes the index again while the service
-- serves (progress in the log: search_index_rebuild), as the folding change did (0027).
DELETE FROM search_spans;
DELETE FROM search_sources;
DELETE FROM search_stale;
UPDATE search_state SET enabled = 0 WHERE id = 1;
ALTER TABLE search_spans ADD COLUMN words text NOT NULL DEFAULT '';
ALTER TABLE search_spans ALTER COLUMN words DROP DEFAULT;
CREATE INDEX search_spans_words ON search_spans USING gin (words gin_trgm_ops);
