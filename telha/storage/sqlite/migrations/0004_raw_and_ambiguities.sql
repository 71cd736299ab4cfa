-- Raw uploaded bytes, content-addressed per scope (docs/formats.md, "Large files"): a large upload is stored here in
-- chunks of exactly 1 MiB and the job payload references it by content hash (workers read it
-- with FetchContent). `complete` is set in the last transaction of a store, so a store cut
-- short by a crash is never referenced and is overwritten by the next upload of those bytes.
CREATE TABLE raw_blobs (
    scope_id     INTEGER NOT NULL,
    content_hash BLOB NOT NULL,           -- BLAKE3 of the raw bytes, 32 bytes
    size         INTEGER NOT NULL,        -- bytes
    complete     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (scope_id, content_hash)
) WITHOUT ROWID;

CREATE TABLE raw_chunks (
    scope_id     INTEGER NOT NULL,
    content_hash BLOB NOT NULL,
    idx          INTEGER NOT NULL,
    data         BLOB NOT NULL,
    PRIMARY KEY (scope_id, content_hash, idx)
);

-- Temporal ambiguities a worker detected (docs/formats.md, "Temporal ambiguity"): one per
-- node version (v1), with its candidates (best first) as submitted; core applied the first
-- candidate's interval to the node version's valid time.
CREATE TABLE ambiguities (
    scope_id                      INTEGER NOT NULL,
    node_id                       BLOB NOT NULL,
    tx                            INTEGER NOT NULL, -- the node version it belongs to
    source_id                     BLOB NOT NULL,
    kind                          TEXT NOT NULL,
    candidates                    BLOB NOT NULL,    -- JSON array, best first
    detector_confidence           REAL,
    applied_candidate_confidence  REAL,
    severity_hint                 TEXT,
    PRIMARY KEY (scope_id, node_id, tx)
) WITHOUT ROWID;
