-- Listings (docs/rest-api.md, "Listings"): GET /v1/sources and GET /v1/ingest, newest first,
-- read through indexes only (telha/storage/listings/queries.py).

-- A job's source name (NULL for an erase job, which lists its source's) and the job whose
-- completion enqueued it (an e-mail's attachment, an archive's file, a crawled page).
ALTER TABLE jobs ADD COLUMN name TEXT;
ALTER TABLE jobs ADD COLUMN parent_job_id BLOB;
UPDATE jobs SET name = json_extract(CAST(payload AS TEXT), '$.name')
    WHERE kind <> 'erase' AND json_valid(CAST(payload AS TEXT));
-- The parent was only written in the child's `enqueued` event (`parent=<uuid>`).
CREATE TEMP TABLE job_hex AS SELECT lower(hex(job_id)) AS h, job_id FROM jobs;
CREATE INDEX temp.job_hex_h ON job_hex (h);
UPDATE jobs SET parent_job_id = (
    SELECT x.job_id FROM job_events e
        JOIN job_hex x ON x.h = lower(replace(substr(e.detail, 8), '-', ''))
    WHERE e.job_id = jobs.job_id AND e.transition = 'enqueued' AND e.detail LIKE 'parent=%'
) WHERE EXISTS (
    SELECT 1 FROM job_events e
    WHERE e.job_id = jobs.job_id AND e.transition = 'enqueued' AND e.detail LIKE 'parent=%'
);
DROP TABLE job_hex;

-- Job listings, newest first, one index per filter.
CREATE INDEX jobs_by_scope ON jobs (scope_id, created_at, job_id);
CREATE INDEX jobs_by_state ON jobs (scope_id, state, created_at, job_id);
CREATE INDEX jobs_by_kind ON jobs (scope_id, kind, created_at, job_id);
CREATE INDEX jobs_by_source ON jobs (scope_id, source_id, created_at, job_id);
CREATE INDEX jobs_by_parent ON jobs (parent_job_id, created_at, job_id)
    WHERE parent_job_id IS NOT NULL;

-- One row per source of a scope (telha/storage/core/sources.py), kept in the transactions
-- that enqueue its jobs and publish, retire or erase its versions: its name, its format,
-- how it stands (`pending` while it has no published version), its latest published
-- version, how many it has, its last job and when it last changed (µs).
CREATE TABLE sources (
    scope_id      INTEGER NOT NULL,
    source_id     BLOB NOT NULL,
    name          TEXT NOT NULL,
    format        TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'current', 'retired', 'erased')),
    latest_tx     INTEGER,
    version_count INTEGER NOT NULL DEFAULT 0,
    last_job_id   BLOB,
    changed_at    INTEGER NOT NULL,
    PRIMARY KEY (scope_id, source_id)
) WITHOUT ROWID;
CREATE INDEX sources_by_change ON sources (scope_id, changed_at, source_id);
CREATE INDEX sources_by_state ON sources (scope_id, state, changed_at, source_id);
CREATE INDEX sources_by_format ON sources (scope_id, format, changed_at, source_id);
CREATE INDEX sources_by_name ON sources (scope_id, name);

-- Backfill: each source's latest published version, then its last job.
INSERT INTO sources (scope_id, source_id, name, format, state, latest_tx, version_count,
                     changed_at)
    SELECT v.scope_id, v.source_id, v.name, v.format,
           CASE WHEN v.erased_at IS NOT NULL THEN 'erased'
                WHEN v.retired_tx IS NOT NULL THEN 'retired' ELSE 'current' END,
           v.tx,
           (SELECT count(*) FROM source_versions c WHERE c.scope_id = v.scope_id
                AND c.source_id = v.source_id AND c.published_tx IS NOT NULL),
           max(v.published_tx, coalesce(v.retired_tx, 0), coalesce(v.erased_at, 0))
    FROM source_versions v
    WHERE v.published_tx IS NOT NULL AND v.tx = (
        SELECT max(m.tx) FROM source_versions m WHERE m.scope_id = v.scope_id
            AND m.source_id = v.source_id AND m.published_tx IS NOT NULL
    );
CREATE TEMP TABLE last_jobs AS
    SELECT j.scope_id, j.source_id, j.job_id, j.created_at, j.format,
           coalesce(j.name, (SELECT k.name FROM jobs k WHERE k.scope_id = j.scope_id
                AND k.source_id = j.source_id AND k.name IS NOT NULL LIMIT 1), '') AS name
    FROM jobs j
    WHERE j.job_id = (
        SELECT k.job_id FROM jobs k WHERE k.scope_id = j.scope_id AND k.source_id = j.source_id
        ORDER BY k.created_at DESC, k.job_id DESC LIMIT 1
    );
INSERT INTO sources (scope_id, source_id, name, format, state, version_count, last_job_id,
                     changed_at)
    SELECT scope_id, source_id, name, format, 'pending', 0, job_id, created_at
    FROM last_jobs WHERE true
    ON CONFLICT (scope_id, source_id) DO UPDATE SET last_job_id = excluded.last_job_id,
        changed_at = max(sources.changed_at, excluded.changed_at);
DROP TABLE last_jobs;
