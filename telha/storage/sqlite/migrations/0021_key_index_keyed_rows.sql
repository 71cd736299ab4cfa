-- The match key index holds only rows with a key to probe (docs/architecture.md, "Deferred
-- keys"): a source's first single-shot version stores the deferred key x'' in every row, and
-- entering each of them into this index cost a 10,000-node version ~15 ms of its commit. Rows
-- with a worker-supplied id (no key: NULL) stay in it, so a publish still finds them by key.
-- SQLite uses a partial index only for a query that spells its condition out, so the queries
-- that probe it carry `match_key IS NOT x''` (the SQLite dialect's key_index_condition).
DROP INDEX nodes_by_key;
CREATE INDEX nodes_by_key ON nodes (scope_id, source_id, match_key) WHERE match_key IS NOT x'';
ANALYZE sqlite_schema;
