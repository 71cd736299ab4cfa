-- Streaming multi-submit (docs/architecture.md, "Streaming"): every row of a stream carries its pinned version's tx, and
-- tx values are unique in a store, so an abandoned stream's rows are found by their tx: nodes
-- through nodes_by_source (every node row carries the source that wrote it), edges here.
CREATE INDEX edges_by_tx ON edges (scope_id, tx_from);
