-- Every PL/pgSQL function and trigger of the PostgreSQL engine, as the code uses them now
-- (docs/architecture.md, "Where the SQL lives"). The migrator applies this file after the
-- numbered migrations on every migrate, in one transaction (telha/storage/postgres/migrate.py):
-- each statement is CREATE OR REPLACE, so editing a function here is the whole change. The
-- migrations hold tables, indexes and data only; a migration drops a function's old signature
-- when one changes (0029 drops every signature shipped before this file).
-- schema.txt beside this file is the schema this gives; `make schema` writes it again.


-- The source's row from its latest published version, changed at p_at: what
-- telha.storage.core.sources.note_versions writes, for telha_commit_single.
CREATE OR REPLACE FUNCTION telha_note_versions(p_scope integer, p_source bytea, p_at bigint)
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


-- Enqueue in one round trip (telha.storage.postgres.fast.FastJobOps.enqueue_job): the
-- blocklist check and request-level dedup under the (scope, source) advisory lock, the job
-- row, its first event, its source's row (telha.storage.core.sources.note_job), its lease
-- head (telha.storage.core.fair_lease.note_head) and the NOTIFY, as one call that is its own
-- transaction. A VOLATILE PL/pgSQL function takes a new snapshot per statement under READ
-- COMMITTED, so the dedup reads after the lock see every committed enqueue and version of
-- that source (which one statement could not: its snapshot predates the lock).
--
-- The rules are stated once, in Python, and this is their SQL copy, clause for clause:
-- telha.storage.core.jobs.enqueue's order (the lock, the blocklist, then dedup), the blocklist
-- of telha.storage.core.blocklist (an empty digest is never on it), the latest version's
-- match of telha.domain.dedup.same_identity (the same bytes and fingerprint, neither retired
-- nor erased), the active job's and the fetch format's of telha.storage.core.jobs._dedup.
-- tests/integration/test_pg_fast_paths.py runs a case per clause through both paths and
-- compares every row; a rule changed there changes here, and a case is added there.
--
-- Returns (deduplicated, job_id, erased): (false, new id, false) when inserted; (true, active
-- job id, false) when a pending or leased job matches; (true, NULL, false) when the latest
-- version matches; (false, NULL, true) when the content hash is blocklisted.
CREATE OR REPLACE FUNCTION telha_enqueue(
    p_job_id bytea, p_scope integer, p_kind text, p_format text, p_source bytea,
    p_hash bytea, p_payload bytea, p_now bigint, p_dedup boolean, p_detail text,
    p_lock_key bigint, p_channel text, p_name text,
    p_fingerprint bytea
) RETURNS TABLE (deduplicated boolean, job_id bytea, erased boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_latest bytea;
    v_retired bigint;
    v_erased bigint;
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
        SELECT sv.content_hash, sv.retired_tx, sv.erased_at, sv.fingerprint
            INTO v_latest, v_retired, v_erased, v_fingerprint
            FROM source_versions sv
            WHERE sv.scope_id = p_scope AND sv.source_id = p_source
              AND sv.published_tx IS NOT NULL
            ORDER BY sv.tx DESC LIMIT 1;
        IF v_latest IS NOT NULL AND v_retired IS NULL AND v_erased IS NULL AND v_latest = p_hash
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


-- The fair lease in one call (telha.storage.postgres.fast.FastJobOps.lease_next_job): the
-- pick of telha.storage.core.fair_lease and the writes of telha.storage.core.jobs.lease, in
-- one round trip instead of about eight. The heads of p_formats (of p_scope only, unless NULL)
-- with an available pending job are read least recently leased first (at most p_candidates:
-- telha.storage.core.fair_lease.CANDIDATES); each head's oldest available job is locked with
-- SKIP LOCKED in its own statement, so a job another transaction is leasing is passed over
-- and never leased twice; the first one locked is leased, with its `leased` event, and its
-- head moved to the back. No row: nothing available. The statements keep generic plans.
CREATE OR REPLACE FUNCTION telha_lease_fair(
    p_formats text[], p_now bigint, p_owner text, p_deadline bigint, p_scope integer,
    p_candidates integer
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
        ORDER BY h.last_leased_at, h.scope_id, h.format LIMIT p_candidates
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


-- A single-shot submission's commit in one call (telha.storage.postgres.fast
-- .FastVersionOps._commit_fast), its own transaction, for the case where there is nothing to
-- supersede: a source with no published version and no open rows. Then the match of
-- telha.storage.core.publish is empty, so the caller builds the rows with their match keys
-- and no previous ids. In the order of the general path's locks: the job row (lease fence),
-- the (scope, source) advisory locks, then (new snapshots) the checks, and last the clock row;
-- then every row (each table's rows one array of its row type, read by field name; the row
-- types are a migration's, 0029), the version published at its own tx with its root node and
-- changes, the job's completion with its stats and its `completed` event, and the source's
-- row (telha_note_versions). The caller names every argument (p_job => …).
--
-- Returns (outcome, tx): 'stale' (the job is not leased under p_gen), 'general' (the case
-- needs the general path: a stream checkpoint, a child job, a source with a published version
-- or open rows, blocklisted content, an explicit node id that exists), both with nothing
-- written; or 'committed' with the transaction time.
CREATE OR REPLACE FUNCTION telha_commit_single(
    p_job bytea, p_gen integer, p_keys bigint[], p_scope integer, p_source bytea,
    p_explicit bytea[], p_now bigint, p_stats bytea, p_detail text,
    p_version telha_version_row, p_chunks telha_chunk_row[], p_nodes telha_node_row[],
    p_labels telha_label_row[], p_edges telha_edge_row[], p_spans telha_span_row[],
    p_ambiguities telha_ambiguity_row[]
) RETURNS TABLE (outcome text, tx bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_state text;
    v_gen integer;
    v_cont bytea;
    v_key bigint;
    v_tx bigint;
BEGIN
    SELECT j.state, j.lease_generation, j.continuation INTO v_state, v_gen, v_cont
        FROM jobs j WHERE j.job_id = p_job FOR UPDATE;
    IF v_state IS DISTINCT FROM 'leased' OR v_gen IS DISTINCT FROM p_gen THEN
        RETURN QUERY SELECT 'stale'::text, NULL::bigint;
        RETURN;
    END IF;
    FOR v_key IN SELECT DISTINCT k FROM unnest(p_keys) AS k ORDER BY k LOOP
        PERFORM pg_advisory_xact_lock(v_key);
    END LOOP;
    -- A stream checkpoint; a source with a published version (dedup, supersede) or with
    -- open rows (an unpublished stream the publish would close); a child job (an archive
    -- member the archive may have dropped meanwhile: telha.storage.core.members).
    IF v_cont IS NOT NULL
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
               AND (b.digest = p_version.content_hash
                    OR b.digest = p_version.canonical_text_hash)) THEN
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
        SELECT p_scope, p_source, v_tx, v.name, v.format, v.content_hash,
               v.canonical_text_hash, v.size, v.worker, v.job_id, v.blob_id, v.text_len, v_tx,
               v.root_node_id, v.changes
        FROM (SELECT (p_version).*) AS v;
    INSERT INTO blob_chunks (scope_id, blob_id, idx, data)
        SELECT p_scope, p_version.blob_id, c.idx, c.data FROM unnest(p_chunks) AS c
        ON CONFLICT DO NOTHING;
    INSERT INTO nodes (scope_id, node_id, tx_from, labels, properties, provenance, source_id,
                       valid_from, valid_to, match_key)
        SELECT p_scope, n.node_id, v_tx, n.labels, n.properties, n.provenance, n.source_id,
               n.valid_from, n.valid_to, n.match_key
        FROM unnest(p_nodes) AS n;
    INSERT INTO node_labels (scope_id, label, node_id, tx_from)
        SELECT p_scope, l.label, l.node_id, v_tx FROM unnest(p_labels) AS l;
    INSERT INTO edges (scope_id, edge_id, tx_from, type, from_id, to_id, properties, source_id)
        SELECT p_scope, e.edge_id, v_tx, e.type, e.from_id, e.to_id, e.properties, e.source_id
        FROM unnest(p_edges) AS e
        ON CONFLICT DO NOTHING;
    INSERT INTO span_rows (scope_id, source_id, source_version_tx, start, "end", kind,
                           linked_nodes)
        SELECT p_scope, s.source_id, v_tx, s.start, s."end", s.kind, s.linked_nodes
        FROM unnest(p_spans) AS s
        ON CONFLICT (scope_id, source_id, source_version_tx, start, "end") DO UPDATE SET
            linked_nodes = span_rows.linked_nodes || excluded.linked_nodes;
    INSERT INTO ambiguities (scope_id, node_id, tx, source_id, kind, candidates,
                             detector_confidence, applied_candidate_confidence, severity_hint)
        SELECT p_scope, a.node_id, v_tx, a.source_id, a.kind, a.candidates,
               a.detector_confidence, a.applied_candidate_confidence, a.severity_hint
        FROM unnest(p_ambiguities) AS a;
    UPDATE jobs SET state = 'completed', lease_owner = NULL, lease_deadline = NULL,
            stats = p_stats, continuation = NULL, updated_at = p_now
        WHERE job_id = p_job;
    INSERT INTO job_events (job_id, seq, at, transition, detail)
        VALUES (p_job, (SELECT coalesce(max(e.seq), 0) + 1 FROM job_events e
                        WHERE e.job_id = p_job), p_now, 'completed',
                'version=' || v_tx || p_detail);
    PERFORM telha_note_versions(p_scope, p_source, v_tx);
    RETURN QUERY SELECT 'committed'::text, v_tx;
END
$$;


-- A scope's stored bytes (telha.storage.core.quotas.stored_bytes): every chunk written,
-- rewritten or deleted adds its difference to the scope's counter. The counter's shard is the
-- writing backend's pid, so two transactions adding bytes to one scope never wait on one row.
CREATE OR REPLACE FUNCTION telha_usage() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE OR REPLACE TRIGGER blob_chunks_usage AFTER INSERT OR DELETE OR UPDATE OF data
    ON blob_chunks FOR EACH ROW EXECUTE FUNCTION telha_usage();
CREATE OR REPLACE TRIGGER raw_chunks_usage AFTER INSERT OR DELETE OR UPDATE OF data
    ON raw_chunks FOR EACH ROW EXECUTE FUNCTION telha_usage();
