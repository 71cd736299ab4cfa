-- A version's identity is its bytes and how they were read (docs/architecture.md, "Dedup,
-- identity and versions"): its projection fingerprint (BLAKE3 of `identity`), the identity
-- itself (canonical JSON: worker, projection version, parser versions, format, effective
-- options) and why it superseded the version before it (`content`, `options`, `projection`,
-- `restored`; NULL for a source's first version). Versions written before this migration have
-- none: they count as another projection. A job remembers the fingerprint its request expects.
ALTER TABLE source_versions ADD COLUMN fingerprint bytea;
ALTER TABLE source_versions ADD COLUMN identity text;
ALTER TABLE source_versions ADD COLUMN reason text;
ALTER TABLE jobs ADD COLUMN fingerprint bytea;

-- This migration's function (telha_enqueue's identity rule) now lives in
-- telha/storage/postgres/functions.sql, which the migrator applies after the migrations on
-- every migrate: a migration holds tables and data only.
