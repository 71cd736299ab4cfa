-- The match key index leaves out inherited keys too (docs/architecture.md, "Deferred keys"):
-- a streamed part stores x'00' (telha.domain.identity.INHERITED) in the row of each node it
-- matched, whose key the node's earlier rows hold in this index already. Entering those
-- rows put one entry at a random place of the index per row of a re-ingested part (most of
-- its pages written again in every part). The probes state the condition
-- (the SQLite dialect's key_index_condition).
DROP INDEX nodes_by_key;
CREATE INDEX nodes_by_key ON nodes (scope_id, source_id, match_key)
    WHERE match_key IS NOT x'' AND match_key IS NOT x'00';
ANALYZE sqlite_schema;
