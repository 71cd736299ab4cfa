-- A substring index beside the word index (docs/architecture.md, "Search"): a quote of one
-- word that may lie inside a longer one (`uffal` in `buffalo`, `국어` in `한국어`) takes its
-- candidates from `search_tri`, FTS5's `trigram` tokenizer over the same `body` as
-- `search_fts` (the span's folded words; an ASCII span: its text, whose case the tokenizer
-- folds), rather than from a scan of the scope's rows. External content like `search_fts`,
-- kept statement by statement in the same statements (telha.storage.sqlite.search_rows);
-- `detail = none` (a row's trigrams without their positions: a locate asks for every
-- trigram of the fragment and the canonical text decides) and no column sizes keep it small.
CREATE VIRTUAL TABLE search_tri USING fts5(
    body, content = 'search_spans', content_rowid = 'rowid',
    tokenize = 'trigram', detail = 'none', columnsize = 0
);
-- The rows written before it are dropped with their waiting work and `search_state` says
-- the index is not built: the next start with `[search] enabled` queues every current
-- version and the search indexer writes both indexes again while the service serves
-- (progress in the log: search_index_rebuild), as the folding change did (0027).
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
DELETE FROM search_spans;
DELETE FROM search_sources;
DELETE FROM search_stale;
UPDATE search_state SET enabled = 0 WHERE id = 1;
