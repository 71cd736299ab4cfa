-- Cancelled jobs (docs/architecture.md, "A job's life and its lease"): `cancelled` is a
-- terminal job state beside `completed` and `dead`.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('pending', 'leased', 'completed', 'dead', 'cancelled'));

