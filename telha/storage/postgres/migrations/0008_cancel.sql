-- Cancelled jobs (docs/architecture.md, "A job's life and its lease"): `cancelled` is a
-- terminal job state beside `completed` and `dead`.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('pending', 'leased', 'completed', 'dead', 'cancelled'));

-- A job's children (e-mail attachments, archive members, crawled pages) name their parent in
-- their `enqueued` event (`parent=<jobId>`); cancel with `children=true` finds them here.
CREATE INDEX job_events_enqueued ON job_events (detail) WHERE transition = 'enqueued';
