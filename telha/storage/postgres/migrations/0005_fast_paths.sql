-- Fewer round trips on the hot paths (bench/RESULTS.md, "Queue on PostgreSQL").

-- Lease in one call (PostgresStore.lease_next_job): the oldest available pending job of
-- p_formats (of p_scope only, unless NULL) becomes leased under the next generation, with its
-- `leased` event, and is returned (no row: nothing available). Candidates are read per format
-- through jobs_pending in index order (ORDER BY over `format = ANY(...)` sorts every pending
-- row: O(backlog)); each is locked with SKIP LOCKED in its own statement (a new snapshot
-- under READ COMMITTED), so a job another transaction holds or already leased is passed over
-- and never leased twice. When every candidate was taken and a format had more, the oldest
-- unlocked job of all is looked for (sorted, rare). The statements keep generic plans for the
-- session: the candidate statement was otherwise planned again on every call (~0.1 ms each).
CREATE FUNCTION telha_lease(
    p_formats text[], p_now bigint, p_owner text, p_deadline bigint, p_scope integer
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_ids bytea[];
    v_id bytea;
    v_got bytea;
BEGIN
    IF p_scope IS NULL THEN  -- two statements: each keeps one (generic) plan
        v_ids := ARRAY(
            SELECT c.job_id FROM unnest(p_formats) AS f (fmt) CROSS JOIN LATERAL (
                SELECT j.job_id, j.available_at FROM jobs j
                WHERE j.state = 'pending' AND j.format = f.fmt AND j.available_at <= p_now
                ORDER BY j.available_at, j.job_id LIMIT 16
            ) AS c ORDER BY c.available_at, c.job_id);
    ELSE
        v_ids := ARRAY(
            SELECT c.job_id FROM unnest(p_formats) AS f (fmt) CROSS JOIN LATERAL (
                SELECT j.job_id, j.available_at FROM jobs j
                WHERE j.state = 'pending' AND j.format = f.fmt AND j.available_at <= p_now
                  AND j.scope_id = p_scope
                ORDER BY j.available_at, j.job_id LIMIT 16
            ) AS c ORDER BY c.available_at, c.job_id);
    END IF;
    FOREACH v_id IN ARRAY v_ids LOOP
        SELECT j.job_id INTO v_got FROM jobs j
            WHERE j.job_id = v_id AND j.state = 'pending' AND j.available_at <= p_now
            FOR UPDATE SKIP LOCKED;
        EXIT WHEN FOUND;
    END LOOP;
    IF v_got IS NULL THEN
        IF cardinality(v_ids) < 16 THEN  -- every available job was a candidate
            RETURN;
        END IF;
        SELECT j.job_id INTO v_got FROM jobs j
            WHERE j.state = 'pending' AND j.format = ANY(p_formats) AND j.available_at <= p_now
              AND (p_scope IS NULL OR j.scope_id = p_scope)
            ORDER BY j.available_at, j.job_id LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    INSERT INTO job_events (job_id, seq, at, transition, detail)
        VALUES (v_got, (SELECT coalesce(max(e.seq), 0) + 1 FROM job_events e
                        WHERE e.job_id = v_got), p_now, 'leased', 'worker=' || p_owner);
    RETURN QUERY
        WITH u AS (
            UPDATE jobs SET state = 'leased', lease_generation = lease_generation + 1,
                lease_owner = p_owner, lease_deadline = p_deadline, updated_at = p_now
            WHERE jobs.job_id = v_got RETURNING jobs.*
        ) SELECT * FROM u;
END
$$;

-- A single-shot submission's commit in one call (PostgresStore.commit_version), for the
-- common case only; it is its own transaction. In the order of the general path's locks: the
-- job row (lease fence), the (scope, source) advisory locks, then (new snapshots) the latest
-- finalized version, the erasure blocklist, the current nodes of the explicit ids, and last
-- the clock row; then every row, the job's completion and its `completed` event.
--
-- Returns (outcome, tx): 'stale' (the job is not leased under p_gen), 'general' (the case
-- needs the general path: a stream checkpoint, a duplicate, blocklisted content, an explicit
-- node id that exists), both with nothing written; or 'committed' with the transaction time.
CREATE FUNCTION telha_commit_single(
    p_job bytea, p_gen integer, p_keys bigint[], p_scope integer, p_source bytea,
    p_explicit bytea[], p_now bigint, p_stats bytea, p_detail text,
    -- source_versions (p_source, and the clock's tx)
    v_name text, v_format text, v_hash bytea, v_canonical bytea, v_size bigint, v_worker text,
    v_job bytea, v_blob bytea, v_text_len bigint,
    -- blob_chunks (v_blob)
    c_idx integer[], c_data bytea[],
    -- nodes
    n_id bytea[], n_labels text[], n_props bytea[], n_prov bytea[], n_source bytea[],
    n_from bigint[], n_to bigint[],
    -- node_labels
    l_label text[], l_node bytea[],
    -- edges
    e_id bytea[], e_type text[], e_from bytea[], e_to bytea[], e_props bytea[],
    -- span_rows
    s_source bytea[], s_start bigint[], s_end bigint[], s_kind text[], s_linked bytea[],
    -- ambiguities
    a_node bytea[], a_source bytea[], a_kind text[], a_candidates bytea[], a_conf float8[],
    a_applied float8[], a_severity text[]
) RETURNS TABLE (outcome text, tx bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_check record;
    v_tx bigint;
BEGIN
    -- The lease fence, the advisory locks and the latest version (migration 0002).
    SELECT * INTO v_check FROM telha_commit_check(p_job, p_gen, p_keys, p_scope, p_source);
    IF NOT v_check.held THEN
        RETURN QUERY SELECT 'stale'::text, NULL::bigint;
        RETURN;
    END IF;
    -- A stream checkpoint, or submit-time dedup (records.is_duplicate, Dedup.SUBMIT).
    IF v_check.continuation IS NOT NULL
       OR (v_check.latest_hash = v_hash AND v_check.latest_canonical = v_canonical
           AND v_check.latest_job IS DISTINCT FROM v_job) THEN
        RETURN QUERY SELECT 'general'::text, NULL::bigint;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM erasure_blocklist b WHERE b.scope_id = p_scope
               AND (b.digest = v_hash OR b.digest = v_canonical)) THEN
        RETURN QUERY SELECT 'general'::text, NULL::bigint;
        RETURN;
    END IF;
    IF cardinality(p_explicit) > 0 AND EXISTS (
        SELECT 1 FROM nodes n WHERE n.scope_id = p_scope AND n.tx_to IS NULL
          AND n.node_id = ANY(p_explicit)
    ) THEN
        RETURN QUERY SELECT 'general'::text, NULL::bigint;
        RETURN;
    END IF;
    UPDATE tx_clock SET tx = greatest(tx_clock.tx + 1,
            (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
        WHERE id = 1 RETURNING tx_clock.tx INTO v_tx;
    INSERT INTO source_versions (scope_id, source_id, tx, name, format, content_hash,
                                 canonical_text_hash, size, worker, job_id, blob_id, text_len)
        VALUES (p_scope, p_source, v_tx, v_name, v_format, v_hash, v_canonical, v_size,
                v_worker, v_job, v_blob, v_text_len);
    INSERT INTO blob_chunks (scope_id, blob_id, idx, data)
        SELECT p_scope, v_blob, u.i, u.d FROM unnest(c_idx, c_data) AS u (i, d)
        ON CONFLICT DO NOTHING;
    INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance, source_id,
                       valid_from, valid_to)
        SELECT p_scope, u.id, v_tx, u.lb, u.pr, u.pv, u.src, u.vf, u.vt
        FROM unnest(n_id, n_labels, n_props, n_prov, n_source, n_from, n_to)
            AS u (id, lb, pr, pv, src, vf, vt);
    INSERT INTO node_labels (scope_id, label, node_id, tx_from)
        SELECT p_scope, u.lb, u.id, v_tx FROM unnest(l_label, l_node) AS u (lb, id);
    INSERT INTO edges (scope_id, edge_id, tx_from, type, from_id, to_id, properties)
        SELECT p_scope, u.id, v_tx, u.ty, u.fr, u.t, u.pr
        FROM unnest(e_id, e_type, e_from, e_to, e_props) AS u (id, ty, fr, t, pr);
    INSERT INTO span_rows (scope_id, source_id, source_version_tx, start, "end", kind,
                           linked_nodes)
        SELECT p_scope, u.src, v_tx, u.st, u.en, u.k, u.ln
        FROM unnest(s_source, s_start, s_end, s_kind, s_linked) AS u (src, st, en, k, ln)
        ON CONFLICT (scope_id, source_id, source_version_tx, start, "end") DO UPDATE SET
            linked_nodes = span_rows.linked_nodes || excluded.linked_nodes;
    INSERT INTO ambiguities (scope_id, node_id, tx, source_id, kind, candidates,
                             detector_confidence, applied_candidate_confidence, severity_hint)
        SELECT p_scope, u.id, v_tx, u.src, u.k, u.c, u.dc, u.ac, u.sh
        FROM unnest(a_node, a_source, a_kind, a_candidates, a_conf, a_applied, a_severity)
            AS u (id, src, k, c, dc, ac, sh);
    UPDATE jobs SET state = 'completed', lease_owner = NULL, lease_deadline = NULL,
            stats = p_stats, continuation = NULL, updated_at = p_now
        WHERE job_id = p_job;
    INSERT INTO job_events (job_id, seq, at, transition, detail)
        VALUES (p_job, (SELECT coalesce(max(e.seq), 0) + 1 FROM job_events e
                        WHERE e.job_id = p_job), p_now, 'completed',
                'version=' || v_tx || p_detail);
    RETURN QUERY SELECT 'committed'::text, v_tx;
END
$$;
