-- Streaming multi-submit (spec 004): every row of a stream carries its pinned version's tx, and
-- tx values are unique in a store, so an abandoned stream's rows are found by (scope, tx).
CREATE INDEX nodes_by_tx ON nodes (scope_id, tx_from);
CREATE INDEX edges_by_tx ON edges (scope_id, tx_from);
