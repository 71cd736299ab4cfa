-- Webhooks (docs/operations.md, "Webhooks"): each scope's signing secret, its scope-wide
-- subscriptions, a job's own subscription (options.webhook) and the durable delivery rows a
-- job's terminal transaction writes. `events` is a bit set over the terminal states
-- (telha.domain.webhooks.event_bit).
CREATE TABLE webhook_secrets (
    scope_id   INTEGER PRIMARY KEY,
    secret     TEXT NOT NULL,                -- whsec_<base64>
    created_at INTEGER NOT NULL              -- µs
);

CREATE TABLE webhooks (
    webhook_id BLOB PRIMARY KEY,             -- uuid7
    scope_id   INTEGER NOT NULL,
    url        TEXT NOT NULL,
    events     INTEGER NOT NULL,
    created_at INTEGER NOT NULL              -- µs
) WITHOUT ROWID;
CREATE INDEX webhooks_by_scope ON webhooks (scope_id, webhook_id);

CREATE TABLE job_webhooks (
    job_id BLOB PRIMARY KEY,
    url    TEXT NOT NULL,
    events INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per (job, target) still to deliver; deleted once delivered or given up.
-- `next_attempt_at` doubles as the claim: a deliverer moves it past its claim before sending,
-- so no other replica sends the same attempt.
CREATE TABLE webhook_deliveries (
    delivery_id     BLOB PRIMARY KEY,        -- uuid7; the `webhook-id` header
    scope_id        INTEGER NOT NULL,
    job_id          BLOB NOT NULL,
    url             TEXT NOT NULL,
    event           TEXT NOT NULL,           -- the job's terminal state
    created_at      INTEGER NOT NULL,        -- µs
    next_attempt_at INTEGER NOT NULL,        -- µs
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT
) WITHOUT ROWID;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, delivery_id);
CREATE INDEX webhook_deliveries_age ON webhook_deliveries (created_at);
