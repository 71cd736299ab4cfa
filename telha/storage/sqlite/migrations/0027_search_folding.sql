-- One folding for index and query (docs/architecture.md, "Words and folding"): Telha
-- cuts and folds every word itself (telha.domain.folding) and `body` holds the span's folded
-- words (an ASCII span: its text as it is), so FTS5 must neither cut nor fold any further:
-- the `ascii` tokenizer splits at ASCII punctuation and spaces only and folds ASCII case only.
-- The rows written with `unicode61 remove_diacritics 2` cut and folded other scripts another
-- way (Hangul, й and ё, accented Greek, hamza forms, voiced kana and Indic vowel signs were
-- never found), so they are dropped with their waiting work and `search_state` says the
-- index is not built: the next start with `[search] enabled` queues every current version
-- and the search indexer writes the index again while the service serves (progress in the
-- log: search_index_rebuild).
DROP TABLE search_fts;
CREATE VIRTUAL TABLE search_fts USING fts5(
    body, content = 'search_spans', content_rowid = 'rowid',
    tokenize = 'ascii'
);
DELETE FROM search_spans;
-- The span's text beside its indexed form, so a hit reads it from its index row (SQLite: NULL
-- when `body` is that text unchanged, an ASCII span).
ALTER TABLE search_spans ADD COLUMN text TEXT;
DELETE FROM search_sources;
DELETE FROM search_stale;
UPDATE search_state SET enabled = 0 WHERE id = 1;
