-- GDPR erasure (docs/operations.md, "Erasure"), the tables of the SQLite engine's migration 5. An erased version
-- keeps its row (identity, hashes, when and why) but not its content: its canonical text
-- chunks become redaction records, its span rows go, the node versions it wrote are scrubbed
-- in place and flagged `erased`.
--
-- PostgreSQL never overwrites a row in place: an UPDATE or DELETE leaves the old tuple (with
-- the erased bytes) in the table's pages until VACUUM reclaims it, and in WAL segments until
-- they are recycled. After an erasure the operator runs
--     VACUUM (FULL, ANALYZE) blob_chunks, raw_chunks, nodes, edges, span_rows, jobs,
--         ambiguities;
-- (FULL rewrites the tables, so no dead tuple survives in the data files; a plain VACUUM
-- only marks the space reusable) followed by a CHECKPOINT; base backups and WAL archives
-- taken before that still hold the bytes and age out under the backup retention policy.
ALTER TABLE source_versions ADD COLUMN erased_at bigint;
ALTER TABLE source_versions ADD COLUMN erasure_id bytea;
ALTER TABLE source_versions ADD COLUMN erase_reason text;
CREATE INDEX source_versions_by_erasure ON source_versions (erasure_id)
    WHERE erasure_id IS NOT NULL;
CREATE INDEX source_versions_by_content ON source_versions (scope_id, content_hash);
CREATE INDEX source_versions_by_canonical ON source_versions (scope_id, canonical_text_hash);

ALTER TABLE nodes ADD COLUMN erased boolean NOT NULL DEFAULT false;

CREATE TABLE erasure_blocklist (
    scope_id   integer NOT NULL,
    digest     bytea NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('content', 'canonical')),
    erasure_id bytea NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (scope_id, digest)
);

CREATE TABLE redacted_chunks (
    scope_id   integer NOT NULL,
    blob_id    bytea NOT NULL,
    idx        integer NOT NULL,
    length     integer NOT NULL,
    digest     bytea NOT NULL,
    erasure_id bytea NOT NULL,
    PRIMARY KEY (scope_id, blob_id, idx)
);

CREATE TABLE erasures (
    erasure_id   bytea PRIMARY KEY,
    scope_id     integer NOT NULL,
    source_id    bytea NOT NULL,
    version_tx   bigint,
    principal    text NOT NULL,
    reason       text NOT NULL,
    requested_at bigint NOT NULL,
    completed_at bigint,
    result       bytea
);

-- This migration's function (telha_enqueue's blocklist refusal) now lives in
-- telha/storage/postgres/functions.sql, which the migrator applies after the migrations on
-- every migrate: a migration holds tables and data only.
