-- Fetch-format dedup (docs/architecture.md, "Dedup"): a `web` job has no content hash when it is enqueued, so a
-- crawl's child is deduplicated against a pending or leased job for the same URL instead, as
-- the SQLite engine's enqueue_tx does.
CREATE OR REPLACE FUNCTION telha_enqueue(
    p_job_id bytea, p_scope integer, p_kind text, p_format text, p_source bytea,
    p_hash bytea, p_payload bytea, p_now bigint, p_dedup boolean, p_detail text,
    p_lock_key bigint, p_channel text
) RETURNS TABLE (deduplicated boolean, job_id bytea)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_latest bytea;
    v_active bytea;
BEGIN
    IF p_dedup AND p_hash IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(p_lock_key);
        SELECT sv.content_hash INTO v_latest FROM source_versions sv
            WHERE sv.scope_id = p_scope AND sv.source_id = p_source
              AND sv.canonical_text_hash IS NOT NULL
            ORDER BY sv.tx DESC LIMIT 1;
        IF v_latest IS NOT NULL AND v_latest = p_hash THEN
            RETURN QUERY SELECT true, NULL::bytea;
            RETURN;
        END IF;
        SELECT j.job_id INTO v_active FROM jobs j
            WHERE j.scope_id = p_scope AND j.source_id = p_source AND j.content_hash = p_hash
              AND j.state IN ('pending', 'leased')
            ORDER BY j.created_at, j.job_id LIMIT 1;
        IF v_active IS NOT NULL THEN
            RETURN QUERY SELECT true, v_active;
            RETURN;
        END IF;
    ELSIF p_dedup THEN
        -- A fetch-format job (web: no content hash yet), a crawl's child: deduplicated
        -- against an active job fetching the same name (source).
        PERFORM pg_advisory_xact_lock(p_lock_key);
        SELECT j.job_id INTO v_active FROM jobs j
            WHERE j.scope_id = p_scope AND j.source_id = p_source AND j.format = p_format
              AND j.content_hash IS NULL AND j.state IN ('pending', 'leased')
            ORDER BY j.created_at, j.job_id LIMIT 1;
        IF v_active IS NOT NULL THEN
            RETURN QUERY SELECT true, v_active;
            RETURN;
        END IF;
    END IF;
    INSERT INTO jobs (job_id, scope_id, kind, format, source_id, content_hash, payload, state,
                      available_at, created_at, updated_at)
        VALUES (p_job_id, p_scope, p_kind, p_format, p_source, p_hash, p_payload, 'pending',
                p_now, p_now, p_now);
    INSERT INTO job_events (job_id, seq, at, transition, detail)
        VALUES (p_job_id, 1, p_now, 'enqueued', p_detail);
    PERFORM pg_notify(p_channel, p_format);
    RETURN QUERY SELECT false, p_job_id;
END
$$;
