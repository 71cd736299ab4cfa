-- Full-text search (docs/architecture.md, "Search"): one row per span row of each source's
-- current version (its latest published version, neither retired nor erased), written and
-- deleted in the transactions that publish, supersede, retire and erase versions
-- (telha.storage.search.index). `body` is the span's folded words with their positions,
-- built by telha.domain.search_text (no server dictionary or parser decides what a word is).
-- `labels` is ' A B ' (the linked nodes' labels, spaces around each).
CREATE TABLE search_spans (
    rowid        bigserial PRIMARY KEY,
    scope_id     integer NOT NULL,
    source_id    bytea NOT NULL,
    version_tx   bigint NOT NULL,            -- µs
    start        bigint NOT NULL,            -- UTF-8 byte offsets into the version's text
    "end"        bigint NOT NULL,
    kind         text NOT NULL,
    linked_nodes bytea NOT NULL,             -- concatenated 16-byte node ids
    labels       text NOT NULL,
    format       text NOT NULL,
    body         tsvector NOT NULL
);
CREATE INDEX search_spans_by_source ON search_spans (scope_id, source_id, version_tx, start);
CREATE INDEX search_spans_body ON search_spans USING gin (body);

-- Whether the index is kept (`[search] enabled`) and holds every current version: 0 until a
-- store opened with search enabled has built it (existing databases, or after running with
-- search disabled), then 1.
CREATE TABLE search_state (
    id      integer PRIMARY KEY CHECK (id = 1),
    enabled integer NOT NULL
);
INSERT INTO search_state (id, enabled) VALUES (1, 0);
