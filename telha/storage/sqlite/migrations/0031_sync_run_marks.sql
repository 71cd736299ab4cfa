-- Sync runs in pages (docs/connectors.md, "Sync runs"): each page marks the items it listed
-- (`seen_mark`) or named removed (`removed_mark`) with the run's attempt (its job id and
-- lease generation), so the last page finds what a complete listing retires without core
-- holding the whole listing: a full listing's live items not marked seen, a delta's marked
-- removed.
ALTER TABLE connector_items ADD COLUMN seen_mark BLOB;
ALTER TABLE connector_items ADD COLUMN removed_mark BLOB;
