-- The fair lease in one call (PostgresStore.lease_next_job; bench/RESULTS.md, "Queue on
-- PostgreSQL"): the same pick as telha.storage.core.fair_lease and the same writes as
-- telha.storage.core.jobs.lease, in one round trip instead of about eight.
-- tests/integration/test_pg_fast_paths.py runs the lease cases through both and compares
-- every row. The heads of p_formats (of p_scope only, unless NULL) with an available pending
-- job are read least recently leased first (at most 8); each head's oldest available job is
-- locked with SKIP LOCKED in its own statement, so a job another transaction is leasing is
-- passed over and never leased twice; the first one locked is leased, with its `leased`
-- event, and its head moved to the back. No row: nothing available.
CREATE FUNCTION telha_lease_fair(
    p_formats text[], p_now bigint, p_owner text, p_deadline bigint, p_scope integer
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_head record;
    v_got bytea;
BEGIN
    FOR v_head IN
        SELECT h.scope_id, h.format FROM lease_heads h
        WHERE h.format = ANY(p_formats) AND (p_scope IS NULL OR h.scope_id = p_scope)
          AND EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'pending'
                      AND j.scope_id = h.scope_id AND j.format = h.format
                      AND j.available_at <= p_now)
        ORDER BY h.last_leased_at, h.scope_id, h.format LIMIT 8
    LOOP
        SELECT j.job_id INTO v_got FROM jobs j
            WHERE j.state = 'pending' AND j.scope_id = v_head.scope_id
              AND j.format = v_head.format AND j.available_at <= p_now
            ORDER BY j.available_at, j.job_id LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            UPDATE lease_heads SET last_leased_at = p_now
                WHERE scope_id = v_head.scope_id AND format = v_head.format;
            INSERT INTO job_events (job_id, seq, at, transition, detail)
                VALUES (v_got, (SELECT coalesce(max(e.seq), 0) + 1 FROM job_events e
                                WHERE e.job_id = v_got), p_now, 'leased', 'worker=' || p_owner);
            RETURN QUERY
                WITH u AS (
                    UPDATE jobs SET state = 'leased', lease_generation = lease_generation + 1,
                        lease_owner = p_owner, lease_deadline = p_deadline, updated_at = p_now
                    WHERE jobs.job_id = v_got RETURNING jobs.*
                ) SELECT * FROM u;
            RETURN;
        END IF;
    END LOOP;
END
$$;
