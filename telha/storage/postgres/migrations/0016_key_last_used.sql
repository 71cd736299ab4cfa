-- When an API key was last used (µs; NULL: never), for `telha api-key list`. The REST
-- front's key lookup writes it at most once a minute per key (telha/storage/keys/queries.py),
-- never once per request.
ALTER TABLE api_keys ADD COLUMN last_used_at bigint;
