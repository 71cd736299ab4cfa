-- Every PL/pgSQL function and trigger of the PostgreSQL engine, as the code uses them now
-- (docs/architecture.md, "Where the SQL lives"). The migrator applies this file after the
-- numbered migrations on every migrate, in one transaction (telha/storage/postgres/migrate.py):
-- each statement is CREATE OR REPLACE, so editing a function here is the whole change. The
-- migrations hold tables, indexes and data only; a migration drops a function's old signature
-- when one changes (0029 drops every signature shipped before this file).
-- A name in double braces is a statement of the general path (telha.storage.core), filled in by
-- telha.storage.postgres.functions with this file's parameters and variables in its
-- placeholders: the rules are written there once; here stands when each runs and what the
-- function answers.
-- schema.txt beside this file is the schema this gives; `make schema` writes it again.


-- The source's row from its latest published version, changed at p_at
-- (telha.storage.core.sources.note_versions), for telha_commit_single.
CREATE OR REPLACE FUNCTION telha_note_versions(p_scope integer, p_source bytea, p_at bigint)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    {{note_versions}};
END
$$;


-- Enqueue in one round trip (telha.storage.postgres.fast.FastJobs.enqueue): the
-- blocklist check and request-level dedup under the (scope, source) advisory lock, the job
-- row, its first event, its source's row (telha.storage.core.sources.note_job), its lease
-- head (telha.storage.jobs.fair_lease.note_head) and the NOTIFY, as one call that is its own
-- transaction. A VOLATILE PL/pgSQL function takes a new snapshot per statement under READ
-- COMMITTED, so the dedup reads after the lock see every committed enqueue and version of
-- that source (which one statement could not: its snapshot predates the lock).
--
-- The statements are telha.storage.jobs.lifecycle.enqueue's, in its order (the lock, the
-- blocklist, then dedup); the latest version's match is telha.domain.dedup.same_identity's
-- comparison (the same bytes and fingerprint, neither retired nor erased), the one rule
-- restated here. tests/integration/test_pg_fast_paths.py runs a case per clause through both
-- paths and compares every row.
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
#variable_conflict use_column
DECLARE
    v_last record;
    v_active bytea;
BEGIN
    IF p_hash IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(p_lock_key);
        IF EXISTS ({{blocked}}) THEN
            RETURN QUERY SELECT false, NULL::bytea, true;
            RETURN;
        END IF;
    END IF;
    IF p_dedup AND p_hash IS NOT NULL THEN
        {{latest_version}} INTO v_last;
        IF v_last.retired_tx IS NULL AND v_last.erased_at IS NULL
           AND v_last.content_hash = p_hash
           AND v_last.fingerprint IS NOT DISTINCT FROM p_fingerprint THEN
            RETURN QUERY SELECT true, NULL::bytea, false;
            RETURN;
        END IF;
        {{active_same_content}} INTO v_active;
        IF v_active IS NOT NULL THEN
            RETURN QUERY SELECT true, v_active, false;
            RETURN;
        END IF;
    ELSIF p_dedup THEN
        PERFORM pg_advisory_xact_lock(p_lock_key);
        {{active_fetch}} INTO v_active;
        IF v_active IS NOT NULL THEN
            RETURN QUERY SELECT true, v_active, false;
            RETURN;
        END IF;
    END IF;
    {{insert_job}};
    {{enqueued_event}};
    IF p_name IS NULL THEN
        {{note_job_unnamed}};
    ELSE
        {{note_job}};
    END IF;
    IF NOT EXISTS ({{head_find}}) THEN
        {{head_add}};
    END IF;
    PERFORM pg_notify(p_channel, p_format);
    RETURN QUERY SELECT false, p_job_id, false;
END
$$;


-- The fair lease in one call (telha.storage.postgres.fast.FastJobs.lease_next): the
-- pick of telha.storage.jobs.fair_lease and the writes of telha.storage.jobs.lifecycle.lease, in
-- one round trip instead of about eight. The heads of p_formats (of p_scope only, unless NULL)
-- with an available pending job are read least recently leased first (at most p_candidates:
-- telha.storage.jobs.fair_lease.CANDIDATES); each head's oldest available job is locked with
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
    FOR v_head IN {{lease_heads}}
    LOOP
        {{oldest_job}} FOR UPDATE SKIP LOCKED INTO v_got;
        IF FOUND THEN
            {{head_touch}};
            {{leased_event}};
            RETURN QUERY WITH u AS ({{lease_job}} RETURNING jobs.*) SELECT * FROM u;
            RETURN;
        END IF;
    END LOOP;
END
$$;


-- A single-shot submission's commit in one call (telha.storage.postgres.fast
-- .FastVersions._commit_fast), its own transaction, for the case where there is nothing to
-- supersede: a source with no published version and no open rows. Then the match of
-- telha.storage.versions.publish is empty, so the caller builds the rows with their match keys
-- and no previous ids. In the order of the general path's locks: the job row (lease fence),
-- the (scope, source) advisory locks, then (new snapshots) the checks, and last the clock row;
-- then every row (each table's rows one array of its row type, read by field name; the row
-- types are a migration's, 0029, their fields telha.storage.core.row_tables'), the version published at its own tx with its root node and
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
#variable_conflict use_column
DECLARE
    v_job record;
    v_key bigint;
    v_tx bigint;
BEGIN
    {{lease_fence}} FOR UPDATE INTO v_job;
    IF v_job.state IS DISTINCT FROM 'leased'
       OR v_job.lease_generation IS DISTINCT FROM p_gen THEN
        RETURN QUERY SELECT 'stale'::text, NULL::bigint;
        RETURN;
    END IF;
    FOR v_key IN SELECT DISTINCT k FROM unnest(p_keys) AS k ORDER BY k LOOP
        PERFORM pg_advisory_xact_lock(v_key);
    END LOOP;
    -- A stream checkpoint; a source with a published version (dedup, supersede) or with
    -- open rows (an unpublished stream the publish would close); a child job (an archive
    -- member the archive may have dropped meanwhile: telha.storage.versions.members).
    IF v_job.continuation IS NOT NULL OR v_job.parent_job_id IS NOT NULL
       OR EXISTS (SELECT 1 FROM source_versions s WHERE s.scope_id = p_scope
                  AND s.source_id = p_source AND s.published_tx IS NOT NULL)
       OR EXISTS (SELECT 1 FROM nodes n WHERE n.scope_id = p_scope
                  AND n.source_id = p_source AND n.tx_to IS NULL)
       OR EXISTS (SELECT 1 FROM edges e WHERE e.scope_id = p_scope
                  AND e.source_id = p_source AND e.tx_to IS NULL) THEN
        RETURN QUERY SELECT 'general'::text, NULL::bigint;
        RETURN;
    END IF;
    IF EXISTS ({{commit_blocked}}) THEN
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
    {{clock}} INTO v_tx;
    INSERT INTO source_versions (scope_id, source_id, tx, name, format, content_hash,
                                 canonical_text_hash, size, worker, job_id, blob_id, text_len,
                                 published_tx, root_node_id, changes)
        SELECT p_scope, p_source, v_tx, v.name, v.format, v.content_hash,
               v.canonical_text_hash, v.size, v.worker, v.job_id, v.blob_id, v.text_len, v_tx,
               v.root_node_id, v.changes
        FROM (SELECT (p_version).*) AS v;
    {{row_inserts}}
    {{complete_job}};
    {{completed_event}};
    PERFORM telha_note_versions(p_scope, p_source, v_tx);
    RETURN QUERY SELECT 'committed'::text, v_tx;
END
$$;


-- A scope's stored bytes (telha.storage.quotas.limits.stored_bytes): every chunk written,
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
        {{add_usage}};
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER blob_chunks_usage AFTER INSERT OR DELETE OR UPDATE OF data
    ON blob_chunks FOR EACH ROW EXECUTE FUNCTION telha_usage();
CREATE OR REPLACE TRIGGER raw_chunks_usage AFTER INSERT OR DELETE OR UPDATE OF data
    ON raw_chunks FOR EACH ROW EXECUTE FUNCTION telha_usage();
