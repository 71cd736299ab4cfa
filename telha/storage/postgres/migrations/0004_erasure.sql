-- GDPR erasure (docs/operations.md, "Erasure"), the tables of the SQLite engine's migration 5. An erased version
-- keeps its row (identity, hashes, when and why) but not its content: its canonical text
-- chunks become redaction records, its span rows go, the node versions it wrote are scrubbed
-- in place and flagged `erased`.
--
-- PostgreSQL never overwrites a row in place: an UPDATE or DELETE leaves the old tuple (with
-- the erased bytes) in the table's pages until VACUUM reclaims it, and in WAL segments until
-- they are recycled. After an erasure the operator runs
--     VACUUM (FULL, ANALYZE) blob_chunks, raw_chunks, nodes, edges, span_rows, jobs,
--         ambiguities;
-- (FULL rewrites the tables, so no dead tuple survives in the data files; a plain VACUUM
-- only marks the space reusable) followed by a CHECKPOINT; base backups and WAL archives
-- taken before that still hold the bytes and age out under the backup retention policy.
ALTER TABLE source_versions ADD COLUMN erased_at bigint;
ALTER TABLE source_versions ADD COLUMN erasure_id bytea;
ALTER TABLE source_versions ADD COLUMN erase_reason text;
CREATE INDEX source_versions_by_erasure ON source_versions (erasure_id)
    WHERE erasure_id IS NOT NULL;
CREATE INDEX source_versions_by_content ON source_versions (scope_id, content_hash);
CREATE INDEX source_versions_by_canonical ON source_versions (scope_id, canonical_text_hash);

ALTER TABLE nodes ADD COLUMN erased boolean NOT NULL DEFAULT false;

CREATE TABLE erasure_blocklist (
    scope_id   integer NOT NULL,
    digest     bytea NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('content', 'canonical')),
    erasure_id bytea NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (scope_id, digest)
);

CREATE TABLE redacted_chunks (
    scope_id   integer NOT NULL,
    blob_id    bytea NOT NULL,
    idx        integer NOT NULL,
    length     integer NOT NULL,
    digest     bytea NOT NULL,
    erasure_id bytea NOT NULL,
    PRIMARY KEY (scope_id, blob_id, idx)
);

CREATE TABLE erasures (
    erasure_id   bytea PRIMARY KEY,
    scope_id     integer NOT NULL,
    source_id    bytea NOT NULL,
    version_tx   bigint,
    principal    text NOT NULL,
    reason       text NOT NULL,
    requested_at bigint NOT NULL,
    completed_at bigint,
    result       bytea
);

-- telha_enqueue (migrations 2, 3) also refuses a blocklisted content hash: `erased` true,
-- nothing written (checked before any dedup match, under the source's advisory lock).
DROP FUNCTION telha_enqueue(bytea, integer, text, text, bytea, bytea, bytea, bigint, boolean,
                            text, bigint, text);
CREATE FUNCTION telha_enqueue(
    p_job_id bytea, p_scope integer, p_kind text, p_format text, p_source bytea,
    p_hash bytea, p_payload bytea, p_now bigint, p_dedup boolean, p_detail text,
    p_lock_key bigint, p_channel text
) RETURNS TABLE (deduplicated boolean, job_id bytea, erased boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_latest bytea;
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
        SELECT sv.content_hash INTO v_latest FROM source_versions sv
            WHERE sv.scope_id = p_scope AND sv.source_id = p_source
              AND sv.canonical_text_hash IS NOT NULL
            ORDER BY sv.tx DESC LIMIT 1;
        IF v_latest IS NOT NULL AND v_latest = p_hash THEN
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
