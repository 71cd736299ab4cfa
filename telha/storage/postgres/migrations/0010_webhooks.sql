-- Webhooks (docs/operations.md, "Webhooks"): each scope's signing secret, its scope-wide
-- subscriptions, a job's own subscription (options.webhook) and the durable delivery rows a
-- job's terminal transaction writes. `events` is a bit set over the terminal states
-- (telha.domain.webhooks.event_bit).
CREATE TABLE webhook_secrets (
    scope_id   integer PRIMARY KEY,
    secret     text NOT NULL,                -- whsec_<base64>
    created_at bigint NOT NULL               -- µs
);

CREATE TABLE webhooks (
    webhook_id bytea PRIMARY KEY,            -- uuid7
    scope_id   integer NOT NULL,
    url        text NOT NULL,
    events     integer NOT NULL,
    created_at bigint NOT NULL               -- µs
);
CREATE INDEX webhooks_by_scope ON webhooks (scope_id, webhook_id);

CREATE TABLE job_webhooks (
    job_id bytea PRIMARY KEY,
    url    text NOT NULL,
    events integer NOT NULL
);

-- One row per (job, target) still to deliver; deleted once delivered or given up.
-- `next_attempt_at` doubles as the claim: a deliverer moves it past its claim before sending
-- (rows selected FOR UPDATE SKIP LOCKED), so no other replica sends the same attempt.
CREATE TABLE webhook_deliveries (
    delivery_id     bytea PRIMARY KEY,       -- uuid7; the `webhook-id` header
    scope_id        integer NOT NULL,
    job_id          bytea NOT NULL,
    url             text NOT NULL,
    event           text NOT NULL,           -- the job's terminal state
    created_at      bigint NOT NULL,         -- µs
    next_attempt_at bigint NOT NULL,         -- µs
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, delivery_id);
CREATE INDEX webhook_deliveries_age ON webhook_deliveries (created_at);
