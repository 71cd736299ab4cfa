-- Full-text search (docs/architecture.md, "Search"): one row per span row of each source's
-- current version (its latest published version, neither retired nor erased), written and
-- deleted in the transactions that publish, supersede, retire and erase versions
-- (telha.storage.search.index). `body` is the span's text with a space between CJK
-- characters (telha.domain.search_text.fts5_body); `search_fts` indexes it. `labels` is
-- ' A B ' (the linked nodes' labels, spaces around each).
CREATE TABLE search_spans (
    rowid        INTEGER PRIMARY KEY,
    scope_id     INTEGER NOT NULL,
    source_id    BLOB NOT NULL,
    version_tx   INTEGER NOT NULL,           -- µs
    start        INTEGER NOT NULL,           -- UTF-8 byte offsets into the version's text
    "end"        INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    linked_nodes BLOB NOT NULL,              -- concatenated 16-byte node ids
    labels       TEXT NOT NULL,
    format       TEXT NOT NULL,
    body         TEXT NOT NULL
);
CREATE INDEX search_spans_by_source ON search_spans (scope_id, source_id, version_tx, start);

-- External content: telha.storage.sqlite.search_rows inserts each new row's words and
-- telha.storage.search.index deletes a row's words (FTS5 'delete' with the stored body)
-- in the statements that write and delete `search_spans` rows (one INSERT ... SELECT per
-- version: row triggers cost 4x as much).
CREATE VIRTUAL TABLE search_fts USING fts5(
    scope_id, body, content = 'search_spans', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Whether the index is kept (`[search] enabled`) and holds every current version: 0 until a
-- store opened with search enabled has built it (existing databases, or after running with
-- search disabled), then 1.
CREATE TABLE search_state (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    enabled INTEGER NOT NULL
);
INSERT INTO search_state (id, enabled) VALUES (1, 0);
