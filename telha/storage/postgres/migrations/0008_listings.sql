-- Listings (docs/rest-api.md, "Listings"): GET /v1/sources and GET /v1/ingest, newest first,
-- read through indexes only (telha/storage/core/listings.py).

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

-- What telha.storage.core.sources.note_versions writes, for the fast path below: the
-- source's row from its latest published version, changed at p_at.
CREATE FUNCTION telha_note_versions(p_scope integer, p_source bytea, p_at bigint)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO sources (scope_id, source_id, name, format, state, latest_tx, version_count,
                         changed_at)
        SELECT v.scope_id, v.source_id, v.name, v.format,
               CASE WHEN v.erased_at IS NOT NULL THEN 'erased'
                    WHEN v.retired_tx IS NOT NULL THEN 'retired' ELSE 'current' END,
               v.tx,
               (SELECT count(*) FROM source_versions c WHERE c.scope_id = v.scope_id
                    AND c.source_id = v.source_id AND c.published_tx IS NOT NULL),
               p_at
        FROM source_versions v
        WHERE v.scope_id = p_scope AND v.source_id = p_source AND v.published_tx IS NOT NULL
        ORDER BY v.tx DESC LIMIT 1
        ON CONFLICT (scope_id, source_id) DO UPDATE SET name = excluded.name,
            format = excluded.format, state = excluded.state, latest_tx = excluded.latest_tx,
            version_count = excluded.version_count, changed_at = excluded.changed_at;
END
$$;

-- telha_enqueue (migration 0006) also writes the job's name and its source's row
-- (telha.storage.core.sources.note_job): p_name is new.
DROP FUNCTION telha_enqueue(bytea, integer, text, text, bytea, bytea, bytea, bigint, boolean,
                            text, bigint, text);
CREATE FUNCTION telha_enqueue(
    p_job_id bytea, p_scope integer, p_kind text, p_format text, p_source bytea,
    p_hash bytea, p_payload bytea, p_now bigint, p_dedup boolean, p_detail text,
    p_lock_key bigint, p_channel text, p_name text
) RETURNS TABLE (deduplicated boolean, job_id bytea, erased boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_latest bytea;
    v_retired bigint;
    v_active bytea;
BEGIN
    IF p_hash IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(p_lock_key);
        IF EXISTS (SELECT 1 FROM erasure_blocklist b
                   WHERE b.scope_id = p_scope AND b.digest = p_hash) THEN
            RETURN QUERY SELECT false, NULL::bytea, true;
            RETURN;
        END IF;
    END IF;
    IF p_dedup AND p_hash IS NOT NULL THEN
        SELECT sv.content_hash, sv.retired_tx INTO v_latest, v_retired FROM source_versions sv
            WHERE sv.scope_id = p_scope AND sv.source_id = p_source
              AND sv.published_tx IS NOT NULL
            ORDER BY sv.tx DESC LIMIT 1;
        IF v_latest IS NOT NULL AND v_retired IS NULL AND v_latest = p_hash THEN
            RETURN QUERY SELECT true, NULL::bytea, false;
            RETURN;
        END IF;
        SELECT j.job_id INTO v_active FROM jobs j
            WHERE j.scope_id = p_scope AND j.source_id = p_source AND j.content_hash = p_hash
              AND j.state IN ('pending', 'leased')
            ORDER BY j.created_at, j.job_id LIMIT 1;
        IF v_active IS NOT NULL THEN
            RETURN QUERY SELECT true, v_active, false;
            RETURN;
        END IF;
    ELSIF p_dedup THEN
        PERFORM pg_advisory_xact_lock(p_lock_key);
        SELECT j.job_id INTO v_active FROM jobs j
            WHERE j.scope_id = p_scope AND j.source_id = p_source AND j.format = p_format
              AND j.content_hash IS NULL AND j.state IN ('pending', 'leased')
            ORDER BY j.created_at, j.job_id LIMIT 1;
        IF v_active IS NOT NULL THEN
            RETURN QUERY SELECT true, v_active, false;
            RETURN;
        END IF;
    END IF;
    INSERT INTO jobs (job_id, scope_id, kind, format, source_id, content_hash, payload, state,
                      available_at, created_at, updated_at, name)
        VALUES (p_job_id, p_scope, p_kind, p_format, p_source, p_hash, p_payload, 'pending',
                p_now, p_now, p_now, p_name);
    INSERT INTO job_events (job_id, seq, at, transition, detail)
        VALUES (p_job_id, 1, p_now, 'enqueued', p_detail);
    IF p_name IS NULL THEN
        UPDATE sources SET last_job_id = p_job_id, changed_at = p_now
            WHERE sources.scope_id = p_scope AND sources.source_id = p_source;
    ELSE
        INSERT INTO sources (scope_id, source_id, name, format, state, version_count,
                             last_job_id, changed_at)
            VALUES (p_scope, p_source, p_name, p_format, 'pending', 0, p_job_id, p_now)
            ON CONFLICT (scope_id, source_id) DO UPDATE SET
                format = CASE WHEN sources.version_count = 0 THEN excluded.format
                              ELSE sources.format END,
                last_job_id = excluded.last_job_id, changed_at = excluded.changed_at;
    END IF;
    PERFORM pg_notify(p_channel, p_format);
    RETURN QUERY SELECT false, p_job_id, false;
END
$$;

-- telha_commit_single (migration 0006) also writes its source's row: the rows and the
-- completion stay in telha_commit_rows, this wrapper notes the version it published.
ALTER FUNCTION telha_commit_single(
    bytea, integer, bigint[], integer, bytea, bytea[], bigint, bytea, text, text, text, bytea,
    bytea, bigint, text, bytea, bytea, bigint, bytea, bytea, integer[], bytea[], bytea[],
    text[], bytea[], bytea[], bytea[], bigint[], bigint[], bytea[], text[], bytea[], bytea[],
    text[], bytea[], bytea[], bytea[], bytea[], bytea[], bigint[], bigint[], text[], bytea[],
    bytea[], bytea[], text[], bytea[], float8[], float8[], text[]
) RENAME TO telha_commit_rows;
CREATE FUNCTION telha_commit_single(
    p_job bytea, p_gen integer, p_keys bigint[], p_scope integer, p_source bytea,
    p_explicit bytea[], p_now bigint, p_stats bytea, p_detail text,
    -- source_versions (p_source, and the clock's tx; published at that tx)
    v_name text, v_format text, v_hash bytea, v_canonical bytea, v_size bigint, v_worker text,
    v_job bytea, v_blob bytea, v_text_len bigint, v_root bytea, v_changes bytea,
    -- blob_chunks (v_blob)
    c_idx integer[], c_data bytea[],
    -- nodes
    n_id bytea[], n_labels text[], n_props bytea[], n_prov bytea[], n_source bytea[],
    n_from bigint[], n_to bigint[], n_key bytea[],
    -- node_labels
    l_label text[], l_node bytea[],
    -- edges
    e_id bytea[], e_type text[], e_from bytea[], e_to bytea[], e_props bytea[],
    e_source bytea[],
    -- span_rows
    s_source bytea[], s_start bigint[], s_end bigint[], s_kind text[], s_linked bytea[],
    -- ambiguities
    a_node bytea[], a_source bytea[], a_kind text[], a_candidates bytea[], a_conf float8[],
    a_applied float8[], a_severity text[]
) RETURNS TABLE (outcome text, tx bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM telha_commit_rows(
        p_job, p_gen, p_keys, p_scope, p_source, p_explicit, p_now, p_stats, p_detail, v_name,
        v_format, v_hash, v_canonical, v_size, v_worker, v_job, v_blob, v_text_len, v_root,
        v_changes, c_idx, c_data, n_id, n_labels, n_props, n_prov, n_source, n_from, n_to,
        n_key, l_label, l_node, e_id, e_type, e_from, e_to, e_props, e_source, s_source,
        s_start, s_end, s_kind, s_linked, a_node, a_source, a_kind, a_candidates, a_conf,
        a_applied, a_severity
    );
    IF r.outcome = 'committed' THEN
        PERFORM telha_note_versions(p_scope, p_source, r.tx);
    END IF;
    RETURN QUERY SELECT r.outcome, r.tx;
END
$$;
