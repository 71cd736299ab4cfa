-- A version's identity is its bytes and how they were read (docs/architecture.md, "Dedup,
-- identity and versions"): its projection fingerprint (BLAKE3 of `identity`), the identity
-- itself (canonical JSON: worker, projection version, parser versions, format, effective
-- options) and why it superseded the version before it (`content`, `options`, `projection`,
-- `restored`; NULL for a source's first version). Versions written before this migration have
-- none: they count as another projection. A job remembers the fingerprint its request expects.
ALTER TABLE source_versions ADD COLUMN fingerprint bytea;
ALTER TABLE source_versions ADD COLUMN identity text;
ALTER TABLE source_versions ADD COLUMN reason text;
ALTER TABLE jobs ADD COLUMN fingerprint bytea;

-- telha_enqueue (migration 0015) with the dedup rule of telha.domain.dedup.same_identity:
-- the latest version matches only with the same bytes *and* fingerprint (and not retired), an
-- active job only with the same bytes and fingerprint; the job stores its fingerprint.
-- tests/integration/test_identity_versions.py runs the rule on both engines.
DROP FUNCTION telha_enqueue(bytea, integer, text, text, bytea, bytea, bytea, bigint, boolean,
    text, bigint, text, text);
CREATE FUNCTION telha_enqueue(
    p_job_id bytea, p_scope integer, p_kind text, p_format text, p_source bytea,
    p_hash bytea, p_payload bytea, p_now bigint, p_dedup boolean, p_detail text,
    p_lock_key bigint, p_channel text, p_name text,
    p_fingerprint bytea
) RETURNS TABLE (deduplicated boolean, job_id bytea, erased boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_latest bytea;
    v_retired bigint;
    v_fingerprint bytea;
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
        SELECT sv.content_hash, sv.retired_tx, sv.fingerprint INTO v_latest, v_retired, v_fingerprint
            FROM source_versions sv
            WHERE sv.scope_id = p_scope AND sv.source_id = p_source
              AND sv.published_tx IS NOT NULL
            ORDER BY sv.tx DESC LIMIT 1;
        IF v_latest IS NOT NULL AND v_retired IS NULL AND v_latest = p_hash
           AND v_fingerprint IS NOT DISTINCT FROM p_fingerprint THEN
            RETURN QUERY SELECT true, NULL::bytea, false;
            RETURN;
        END IF;
        SELECT j.job_id INTO v_active FROM jobs j
            WHERE j.scope_id = p_scope AND j.source_id = p_source AND j.content_hash = p_hash
              AND j.fingerprint IS NOT DISTINCT FROM p_fingerprint
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
                      available_at, created_at, updated_at, name, fingerprint)
        VALUES (p_job_id, p_scope, p_kind, p_format, p_source, p_hash, p_payload, 'pending',
                p_now, p_now, p_now, p_name, p_fingerprint);
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
