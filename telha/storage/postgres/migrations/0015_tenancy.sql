-- Fair leasing across scopes and per-scope quotas (docs/architecture.md, "Fair leasing";
-- docs/operations.md, "Quotas and rate limits"). See the SQLite migration of the same number
-- for the tables; here the counter's shard is the writing backend's pid, so two
-- transactions adding bytes to one scope never wait on one row.
CREATE TABLE lease_heads (
    scope_id       integer NOT NULL,
    format         text NOT NULL,
    last_leased_at bigint NOT NULL,   -- µs; 0: never leased
    PRIMARY KEY (scope_id, format)
);
CREATE INDEX lease_heads_order ON lease_heads (format, last_leased_at, scope_id);
INSERT INTO lease_heads (scope_id, format, last_leased_at)
    SELECT DISTINCT scope_id, format, 0 FROM jobs WHERE state IN ('pending', 'leased');
CREATE INDEX jobs_fair ON jobs (scope_id, format, available_at, job_id) WHERE state = 'pending';

-- Leasing now goes through telha.storage.core.jobs.lease (the fair pick) on both engines.
DROP FUNCTION telha_lease(text[], bigint, text, bigint, integer);

CREATE TABLE scope_limits (
    scope_id integer NOT NULL,
    key      text NOT NULL,
    value    double precision NOT NULL,   -- 0: unlimited
    PRIMARY KEY (scope_id, key)
);

CREATE TABLE scope_usage (
    scope_id     integer NOT NULL,
    shard        integer NOT NULL,
    stored_bytes bigint NOT NULL,
    PRIMARY KEY (scope_id, shard)
);
INSERT INTO scope_usage (scope_id, shard, stored_bytes)
    SELECT scope_id, 0, sum(n) FROM (
        SELECT scope_id, octet_length(data) AS n FROM blob_chunks
        UNION ALL SELECT scope_id, octet_length(data) FROM raw_chunks
    ) AS b GROUP BY scope_id;

CREATE FUNCTION telha_usage() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_scope integer;
    v_delta bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        v_scope := NEW.scope_id; v_delta := octet_length(NEW.data);
    ELSIF TG_OP = 'DELETE' THEN
        v_scope := OLD.scope_id; v_delta := -octet_length(OLD.data);
    ELSE
        v_scope := NEW.scope_id; v_delta := octet_length(NEW.data) - octet_length(OLD.data);
    END IF;
    IF v_delta <> 0 THEN
        INSERT INTO scope_usage (scope_id, shard, stored_bytes)
            VALUES (v_scope, pg_backend_pid(), v_delta)
            ON CONFLICT (scope_id, shard)
            DO UPDATE SET stored_bytes = scope_usage.stored_bytes + excluded.stored_bytes;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER blob_chunks_usage AFTER INSERT OR DELETE OR UPDATE OF data ON blob_chunks
    FOR EACH ROW EXECUTE FUNCTION telha_usage();
CREATE TRIGGER raw_chunks_usage AFTER INSERT OR DELETE OR UPDATE OF data ON raw_chunks
    FOR EACH ROW EXECUTE FUNCTION telha_usage();

-- telha_enqueue (migration 0008) also writes the job's lease head
-- (telha.storage.core.fair_lease.note_head).
CREATE OR REPLACE FUNCTION telha_enqueue(
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
    IF NOT EXISTS (SELECT 1 FROM lease_heads h
                   WHERE h.scope_id = p_scope AND h.format = p_format) THEN
        INSERT INTO lease_heads (scope_id, format, last_leased_at)
            VALUES (p_scope, p_format, 0) ON CONFLICT DO NOTHING;
    END IF;
    PERFORM pg_notify(p_channel, p_format);
    RETURN QUERY SELECT false, p_job_id, false;
END
$$;
