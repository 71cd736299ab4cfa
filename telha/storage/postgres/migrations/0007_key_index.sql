-- The match key index keeps the rows a later version closes (docs/architecture.md, "Versions
-- and node identity"). Partial on `tx_to IS NULL`, every supersede removed each closed row's
-- entry from a randomly-keyed index; now closing a row leaves its entry, and a probe reads
-- `tx_to` from the row it already fetches.
DROP INDEX nodes_by_key;
CREATE INDEX nodes_by_key ON nodes (scope_id, source_id, match_key);
