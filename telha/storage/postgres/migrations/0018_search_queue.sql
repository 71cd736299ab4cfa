-- The full-text index is kept after the commits that change what is current
-- (docs/architecture.md, "Search"): those commits only record here what the index must do;
-- the search indexer (telha.search.indexer) does it a batch of rows per transaction, and a
-- search or locate first does what its own scope has waiting.
--
-- search_sources: per source, the version the index holds or is being filled with (its
-- current version). `done` = 0 while being filled: span rows up to the key
-- (`last_start`, `last_end`) in (start, end) order are written, (-1, -1) before the first.
CREATE TABLE search_sources (
    scope_id   integer NOT NULL,
    source_id  bytea NOT NULL,
    version_tx bigint NOT NULL,             -- µs
    last_start bigint NOT NULL,
    last_end   bigint NOT NULL,
    done       boolean NOT NULL,
    PRIMARY KEY (scope_id, source_id)
);
CREATE INDEX search_sources_todo ON search_sources (version_tx) WHERE NOT done;
CREATE INDEX search_sources_todo_by_scope ON search_sources (scope_id, version_tx) WHERE NOT done;
-- search_stale: versions no longer current whose rows are still to be deleted; a search
-- never answers them (it deletes its scope's first, or leaves their rows out).
CREATE TABLE search_stale (
    scope_id   integer NOT NULL,
    source_id  bytea NOT NULL,
    version_tx bigint NOT NULL,             -- µs
    PRIMARY KEY (scope_id, source_id, version_tx)
);
-- An index built before: each source's rows are its current version's, complete.
INSERT INTO search_sources (scope_id, source_id, version_tx, last_start, last_end, done)
    SELECT scope_id, source_id, max(version_tx), -1, -1, true FROM search_spans
    GROUP BY scope_id, source_id;
