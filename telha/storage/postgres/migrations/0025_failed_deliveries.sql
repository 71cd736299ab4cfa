-- A webhook delivery that can never be made (docs/operations.md, "Webhooks"): its URL does
-- not parse, its destination is refused, or handling it raised. It stays with state
-- 'failed' and the reason in last_error; it is never claimed again and does not count as
-- undelivered (both indexes hold pending rows only); retention removes it with its job.
ALTER TABLE webhook_deliveries ADD COLUMN state text NOT NULL DEFAULT 'pending';
DROP INDEX webhook_deliveries_due;
DROP INDEX webhook_deliveries_age;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, delivery_id)
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_age ON webhook_deliveries (created_at)
    WHERE state = 'pending';
