-- GDPR erasure (docs/operations.md, "Erasure"). An erased version keeps its row (identity, hashes, when and why it
-- was erased) but not its content: its canonical text chunks become redaction records, its
-- span rows go, the node versions it wrote are scrubbed in place and flagged `erased`.
ALTER TABLE source_versions ADD COLUMN erased_at INTEGER;      -- µs; NULL while not erased
ALTER TABLE source_versions ADD COLUMN erasure_id BLOB;        -- the erase job that did it
ALTER TABLE source_versions ADD COLUMN erase_reason TEXT;
CREATE INDEX source_versions_by_erasure ON source_versions (erasure_id)
    WHERE erasure_id IS NOT NULL;
CREATE INDEX source_versions_by_content ON source_versions (scope_id, content_hash);
CREATE INDEX source_versions_by_canonical ON source_versions (scope_id, canonical_text_hash);

-- A node version written by an erased version (scrubbed: properties {}, provenance []), or
-- the closing version an erasure appended: hidden from every read.
ALTER TABLE nodes ADD COLUMN erased INTEGER NOT NULL DEFAULT 0;

-- Digests (content_hash, canonical_text_hash) refused for good in a scope, checked before
-- every dedup match and every write.
CREATE TABLE erasure_blocklist (
    scope_id   INTEGER NOT NULL,
    digest     BLOB NOT NULL,               -- BLAKE3, 32 bytes
    kind       TEXT NOT NULL CHECK (kind IN ('content', 'canonical')),
    erasure_id BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (scope_id, digest)
) WITHOUT ROWID;

-- What replaced an erased canonical text chunk: its length and hash, never its bytes.
CREATE TABLE redacted_chunks (
    scope_id   INTEGER NOT NULL,
    blob_id    BLOB NOT NULL,
    idx        INTEGER NOT NULL,
    length     INTEGER NOT NULL,            -- bytes the chunk had
    digest     BLOB NOT NULL,               -- BLAKE3 of the chunk's bytes
    erasure_id BLOB NOT NULL,
    PRIMARY KEY (scope_id, blob_id, idx)
) WITHOUT ROWID;

-- The audit of erasures: who asked (the authenticated scope), what (source, version), when,
-- why, and what was erased; never any content.
CREATE TABLE erasures (
    erasure_id   BLOB PRIMARY KEY,          -- the erase job's id
    scope_id     INTEGER NOT NULL,
    source_id    BLOB NOT NULL,
    version_tx   INTEGER,                   -- NULL: every version
    principal    TEXT NOT NULL,
    reason       TEXT NOT NULL,
    requested_at INTEGER NOT NULL,
    completed_at INTEGER,
    result       BLOB                       -- JSON: versions, nodes, span rows, bytes
) WITHOUT ROWID;
