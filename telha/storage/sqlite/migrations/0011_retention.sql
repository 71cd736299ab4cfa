-- Job retention (docs/operations.md, "Retention"; telha/storage/retention/passes.py): the
-- ended jobs in the order they age out, and the jobs that name a raw blob's bytes (a blob
-- no remaining job and no version names is removed).
CREATE INDEX jobs_ended ON jobs (updated_at, job_id)
    WHERE state IN ('completed', 'dead', 'cancelled');
CREATE INDEX jobs_by_content ON jobs (scope_id, content_hash) WHERE content_hash IS NOT NULL;
