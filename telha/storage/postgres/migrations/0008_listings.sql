-- Listings (docs/rest-api.md, "Listings"): GET /v1/sources and GET /v1/ingest, newest first,
-- read through indexes only (telha/storage/listings/queries.py).

-- A job's source name (NULL for an erase job, which lists its source's) and the job whose
-- completion enqueued it (an e-mail's attachment, an archive's file, a crawled page).
ALTER TABLE jobs ADD COLUMN name text;
ALTER TABLE jobs ADD COLUMN parent_job_id bytea;
CREATE FUNCTION pg_temp.payload_name(p bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN convert_from(p, 'UTF8')::jsonb ->> 'name';
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;
UPDATE jobs SET name = pg_temp.payload_name(payload) WHERE kind <> 'erase';
-- The parent was only written in the child's `enqueued` event (`parent=<uuid>`).
UPDATE jobs j SET parent_job_id = p.job_id
    FROM job_events e
        JOIN jobs p ON encode(p.job_id, 'hex') = replace(substr(e.detail, 8), '-', '')
    WHERE e.job_id = j.job_id AND e.transition = 'enqueued' AND e.detail LIKE 'parent=%';

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
-- version, how many it has, its last job and when it last changed (µs). Names compare
-- byte-wise (COLLATE "C"), so a name prefix is one index range.
CREATE TABLE sources (
    scope_id      integer NOT NULL,
    source_id     bytea NOT NULL,
    name          text COLLATE "C" NOT NULL,
    format        text NOT NULL,
    state         text NOT NULL CHECK (state IN ('pending', 'current', 'retired', 'erased')),
    latest_tx     bigint,
    version_count integer NOT NULL DEFAULT 0,
    last_job_id   bytea,
    changed_at    bigint NOT NULL,
    PRIMARY KEY (scope_id, source_id)
);
CREATE INDEX sources_by_change ON sources (scope_id, changed_at, source_id);
CREATE INDEX sources_by_state ON sources (scope_id, state, changed_at, source_id);
CREATE INDEX sources_by_format ON sources (scope_id, format, changed_at, source_id);
CREATE INDEX sources_by_name ON sources (scope_id, name);

-- Backfill: each source's latest published version, then its last job.
INSERT INTO sources (scope_id, source_id, name, format, state, latest_tx, version_count,
                     changed_at)
    SELECT DISTINCT ON (v.scope_id, v.source_id) v.scope_id, v.source_id, v.name, v.format,
           CASE WHEN v.erased_at IS NOT NULL THEN 'erased'
                WHEN v.retired_tx IS NOT NULL THEN 'retired' ELSE 'current' END,
           v.tx,
           (SELECT count(*) FROM source_versions c WHERE c.scope_id = v.scope_id
                AND c.source_id = v.source_id AND c.published_tx IS NOT NULL),
           greatest(v.published_tx, v.retired_tx, v.erased_at)
    FROM source_versions v WHERE v.published_tx IS NOT NULL
    ORDER BY v.scope_id, v.source_id, v.tx DESC;
INSERT INTO sources (scope_id, source_id, name, format, state, version_count, last_job_id,
                     changed_at)
    SELECT DISTINCT ON (j.scope_id, j.source_id) j.scope_id, j.source_id,
           coalesce(j.name, (SELECT k.name FROM jobs k WHERE k.scope_id = j.scope_id
                AND k.source_id = j.source_id AND k.name IS NOT NULL LIMIT 1), ''),
           j.format, 'pending', 0, j.job_id, j.created_at
    FROM jobs j ORDER BY j.scope_id, j.source_id, j.created_at DESC, j.job_id DESC
    ON CONFLICT (scope_id, source_id) DO UPDATE SET last_job_id = excluded.last_job_id,
        changed_at = greatest(sources.changed_at, excluded.changed_at);

-- This migration's functions (telha_note_versions, the source's row in telha_enqueue and
-- telha_commit_single) now live in telha/storage/postgres/functions.sql, which the migrator
-- applies after the migrations on every migrate: a migration holds tables and data only.
