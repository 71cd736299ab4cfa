-- Versions that supersede (docs/architecture.md, "Versions and node identity"), the
-- columns and indexes of the SQLite engine's migration 6. A version is published when it
-- becomes its source's current graph; until then its rows are invisible to every read.
ALTER TABLE source_versions ADD COLUMN published_tx bigint;   -- µs; NULL: not published
UPDATE source_versions SET published_tx = tx WHERE canonical_text_hash IS NOT NULL;
ALTER TABLE source_versions ADD COLUMN retired_tx bigint;
ALTER TABLE source_versions ADD COLUMN retire_reason text;
ALTER TABLE source_versions ADD COLUMN root_node_id bytea;
ALTER TABLE source_versions ADD COLUMN changes bytea;
CREATE INDEX source_versions_by_tx ON source_versions (scope_id, tx);

ALTER TABLE nodes ADD COLUMN match_key bytea;
CREATE INDEX nodes_by_key ON nodes (scope_id, source_id, match_key) WHERE tx_to IS NULL;

ALTER TABLE edges ADD COLUMN source_id bytea;
UPDATE edges e SET source_id = v.source_id FROM source_versions v
    WHERE v.scope_id = e.scope_id AND v.tx = e.tx_from;
CREATE INDEX edges_by_source ON edges (scope_id, source_id) WHERE tx_to IS NULL;

-- Stores written before this migration kept every version's graph current; as the SQLite
-- engine's migration 6, each source's latest published version now supersedes its earlier
-- ones at its own tx, and a worker-id node (not a uuid7) its span rows link gets a version there.
CREATE TEMP TABLE legacy_latest AS
    SELECT scope_id, source_id, max(tx) AS tx FROM source_versions
    WHERE published_tx IS NOT NULL GROUP BY scope_id, source_id;
CREATE TEMP TABLE legacy_rows AS
    SELECT n.scope_id, n.node_id, n.tx_from, n.source_id, l.tx AS latest
    FROM nodes n JOIN legacy_latest l ON l.scope_id = n.scope_id AND l.source_id = n.source_id
    WHERE n.tx_to IS NULL AND n.tx_from < l.tx AND NOT n.erased;
CREATE TEMP TABLE legacy_links AS
    SELECT r.scope_id, r.node_id, r.tx_from, r.latest,
           convert_to('[' || string_agg('[' || s.start || ',' || s."end" || ']', ','
                                        ORDER BY s.start, s."end") || ']', 'UTF8') AS prov
    FROM legacy_rows r JOIN span_rows s ON s.scope_id = r.scope_id
        AND s.source_id = r.source_id AND s.source_version_tx = r.latest
        AND position(r.node_id IN s.linked_nodes) > 0
    WHERE get_byte(r.node_id, 6) >> 4 <> 7
    GROUP BY r.scope_id, r.node_id, r.tx_from, r.latest;
UPDATE nodes n SET tx_to = r.latest FROM legacy_rows r
    WHERE r.scope_id = n.scope_id AND r.node_id = n.node_id AND r.tx_from = n.tx_from;
INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance, source_id,
                   valid_from, valid_to)
    SELECT n.scope_id, n.node_id, k.latest, n.labels, n.properties, k.prov, n.source_id,
           n.valid_from, n.valid_to
    FROM legacy_links k JOIN nodes n ON n.scope_id = k.scope_id AND n.node_id = k.node_id
        AND n.tx_from = k.tx_from;
INSERT INTO node_labels (scope_id, label, node_id, tx_from)
    SELECT l.scope_id, l.label, l.node_id, k.latest
    FROM legacy_links k JOIN node_labels l ON l.scope_id = k.scope_id
        AND l.node_id = k.node_id AND l.tx_from = k.tx_from
    ON CONFLICT DO NOTHING;
UPDATE edges e SET tx_to = l.tx FROM legacy_latest l
    WHERE l.scope_id = e.scope_id AND l.source_id = e.source_id AND e.tx_to IS NULL
        AND e.tx_from < l.tx;
DROP TABLE legacy_links, legacy_rows, legacy_latest;

-- Dedup compares with the source's latest *published* version, and not at all once that
-- version is retired (telha.storage.core.jobs.latest_hashes): an open or abandoned stream is
-- no version yet, and the same bytes after a retire make a new version. telha_enqueue
-- (migrations 2–4) and telha_commit_check (migration 2) keep their signatures.
CREATE OR REPLACE FUNCTION telha_enqueue(
    p_job_id bytea, p_scope integer, p_kind text, p_format text, p_source bytea,
    p_hash bytea, p_payload bytea, p_now bigint, p_dedup boolean, p_detail text,
    p_lock_key bigint, p_channel text
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
                      available_at, created_at, updated_at)
        VALUES (p_job_id, p_scope, p_kind, p_format, p_source, p_hash, p_payload, 'pending',
                p_now, p_now, p_now);
    INSERT INTO job_events (job_id, seq, at, transition, detail)
        VALUES (p_job_id, 1, p_now, 'enqueued', p_detail);
    PERFORM pg_notify(p_channel, p_format);
    RETURN QUERY SELECT false, p_job_id, false;
END
$$;

-- The latest version's hashes and job id: NULLs when the source has no published version
-- or its latest published version is retired (nothing to deduplicate against).
CREATE OR REPLACE FUNCTION telha_commit_check(
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
            SELECT s.content_hash, s.canonical_text_hash, s.job_id, s.retired_tx
            FROM source_versions s
            WHERE s.scope_id = p_scope AND s.source_id = p_source
              AND s.published_tx IS NOT NULL
            ORDER BY s.tx DESC LIMIT 1
        ) AS sv ON sv.retired_tx IS NULL;
END
$$;

-- The single-shot commit in one call (migration 5) learns the publish, for the case where
-- there is nothing to supersede: a source with no published version and no open rows (no
-- stream of it open). Then the match of telha.storage.core.publish is empty, so the caller
-- builds the rows with their match keys and no previous ids; the version is published at its
-- own tx with its root node and changes (nothing removed), and the job completes with its
-- stats merged with the changes, as telha.storage.core.versions.commit writes them. Every
-- other case — a source with a version, an open stream, a stream checkpoint of this job, a
-- child job, blocklisted content, an explicit node id that exists — answers 'general',
-- nothing written.
-- Locks as before: the job row, the (scope, source) advisory locks, the clock row last.
DROP FUNCTION telha_commit_single(
    bytea, integer, bigint[], integer, bytea, bytea[], bigint, bytea, text,
    text, text, bytea, bytea, bigint, text, bytea, bytea, bigint,
    integer[], bytea[],
    bytea[], text[], bytea[], bytea[], bytea[], bigint[], bigint[],
    text[], bytea[],
    bytea[], text[], bytea[], bytea[], bytea[],
    bytea[], bigint[], bigint[], text[], bytea[],
    bytea[], bytea[], text[], bytea[], float8[], float8[], text[]
);
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
    v_check record;
    v_tx bigint;
BEGIN
    -- The lease fence, the advisory locks (telha_commit_check); then new snapshots.
    SELECT * INTO v_check FROM telha_commit_check(p_job, p_gen, p_keys, p_scope, p_source);
    IF NOT v_check.held THEN
        RETURN QUERY SELECT 'stale'::text, NULL::bigint;
        RETURN;
    END IF;
    -- A stream checkpoint; a source with a published version (dedup, supersede) or with
    -- open rows (an unpublished stream the publish would close); a child job (an archive
    -- member the archive may have dropped meanwhile: telha.storage.core.members).
    IF v_check.continuation IS NOT NULL
       OR EXISTS (SELECT 1 FROM job_events ev WHERE ev.job_id = p_job
                  AND ev.transition = 'enqueued' AND ev.detail LIKE 'parent=%')
       OR EXISTS (SELECT 1 FROM source_versions s WHERE s.scope_id = p_scope
                  AND s.source_id = p_source AND s.published_tx IS NOT NULL)
       OR EXISTS (SELECT 1 FROM nodes n WHERE n.scope_id = p_scope
                  AND n.source_id = p_source AND n.tx_to IS NULL)
       OR EXISTS (SELECT 1 FROM edges e WHERE e.scope_id = p_scope
                  AND e.source_id = p_source AND e.tx_to IS NULL) THEN
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
                                 canonical_text_hash, size, worker, job_id, blob_id, text_len,
                                 published_tx, root_node_id, changes)
        VALUES (p_scope, p_source, v_tx, v_name, v_format, v_hash, v_canonical, v_size,
                v_worker, v_job, v_blob, v_text_len, v_tx, v_root, v_changes);
    INSERT INTO blob_chunks (scope_id, blob_id, idx, data)
        SELECT p_scope, v_blob, u.i, u.d FROM unnest(c_idx, c_data) AS u (i, d)
        ON CONFLICT DO NOTHING;
    INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance, source_id,
                       valid_from, valid_to, match_key)
        SELECT p_scope, u.id, v_tx, u.lb, u.pr, u.pv, u.src, u.vf, u.vt, u.mk
        FROM unnest(n_id, n_labels, n_props, n_prov, n_source, n_from, n_to, n_key)
            AS u (id, lb, pr, pv, src, vf, vt, mk);
    INSERT INTO node_labels (scope_id, label, node_id, tx_from)
        SELECT p_scope, u.lb, u.id, v_tx FROM unnest(l_label, l_node) AS u (lb, id);
    INSERT INTO edges (scope_id, edge_id, tx_from, type, from_id, to_id, properties, source_id)
        SELECT p_scope, u.id, v_tx, u.ty, u.fr, u.t, u.pr, u.src
        FROM unnest(e_id, e_type, e_from, e_to, e_props, e_source)
            AS u (id, ty, fr, t, pr, src)
        ON CONFLICT DO NOTHING;
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
