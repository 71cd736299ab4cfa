-- Unchanged edges stay open across versions (docs/architecture.md, "Kept edges"): a new
-- version of a source that asserts an edge its current graph already has (the same id: the
-- same source, type, endpoints and properties) marks the open row with its own tx instead of
-- writing the edge again, and its publish closes only the open rows it neither wrote nor
-- marked. The mark is in no index: setting it rewrites the row in place.
ALTER TABLE edges ADD COLUMN seen_tx bigint;
