-- One folding for index and query (docs/architecture.md, "Words and folding"): the
-- `tsvector`s written before it held words cut and folded another way (every combining mark
-- dropped after decomposition: Hangul, й and ё, accented Greek, hamza forms and voiced kana
-- decomposed, Indic vowel signs cut off), so they are dropped with their waiting work and
-- `search_state` says the index is not built: the next start with `[search] enabled` queues
-- every current version and the search indexer writes the index again while the service
-- serves (progress in the log: search_index_rebuild).
DELETE FROM search_spans;
-- The span's text beside its indexed form, so a hit reads it from its index row (SQLite: NULL
-- when `body` is that text unchanged, an ASCII span).
ALTER TABLE search_spans ADD COLUMN text text;
DELETE FROM search_sources;
DELETE FROM search_stale;
UPDATE search_state SET enabled = 0 WHERE id = 1;
