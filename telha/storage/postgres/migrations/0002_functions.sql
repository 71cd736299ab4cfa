-- Enqueue in one round trip (docs/architecture.md, "The storage seam"): request-level dedup under the (scope, source)
-- advisory lock, the job row, its first event and the NOTIFY, as one call that is its own
-- transaction. A VOLATILE PL/pgSQL function takes a new snapshot per statement under READ
-- COMMITTED, so the dedup reads after the lock see every committed enqueue and version of that
-- source (which one statement could not: its snapshot predates the lock).
--
-- Returns (deduplicated, job_id): (false, new id) when inserted; (true, active job id) when a
-- pending/leased job has the same (source, content hash); (true, NULL) when the source's
-- latest finalized version already has that content hash.
CREATE FUNCTION telha_enqueue(
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

-- The checks a version commit makes before it writes, in one call inside the
-- commit's transaction: lock the job row and check its lease generation (when p_job is not
-- NULL), take the (scope, source) advisory locks in key order, then read the source's latest
-- finalized version (a new snapshot, after the locks).
--
-- Returns one row: held (false: the job is not leased under p_gen; nothing was locked but
-- the row), the job's streaming checkpoint, and the latest version's content hash, canonical
-- text hash and job id (NULLs for a new source).
CREATE FUNCTION telha_commit_check(
    p_job bytea, p_gen integer, p_keys bigint[], p_scope integer, p_source bytea
) RETURNS TABLE (
    held boolean, continuation bytea, latest_hash bytea, latest_canonical bytea,
    latest_job bytea
)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_state text;
    v_gen integer;
    v_cont bytea;
    v_key bigint;
BEGIN
    IF p_job IS NOT NULL THEN
        SELECT j.state, j.lease_generation, j.continuation INTO v_state, v_gen, v_cont
            FROM jobs j WHERE j.job_id = p_job FOR UPDATE;
        IF v_state IS DISTINCT FROM 'leased' OR v_gen IS DISTINCT FROM p_gen THEN
            RETURN QUERY SELECT false, NULL::bytea, NULL::bytea, NULL::bytea, NULL::bytea;
            RETURN;
        END IF;
    END IF;
    FOR v_key IN SELECT DISTINCT k FROM unnest(p_keys) AS k ORDER BY k LOOP
        PERFORM pg_advisory_xact_lock(v_key);
    END LOOP;
    RETURN QUERY
        SELECT true, v_cont, sv.content_hash, sv.canonical_text_hash, sv.job_id
        FROM (SELECT 1) AS one
        LEFT JOIN LATERAL (
            SELECT s.content_hash, s.canonical_text_hash, s.job_id FROM source_versions s
            WHERE s.scope_id = p_scope AND s.source_id = p_source
              AND s.canonical_text_hash IS NOT NULL
            ORDER BY s.tx DESC LIMIT 1
        ) AS sv ON true;
END
$$;
