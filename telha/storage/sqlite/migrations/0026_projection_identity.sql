-- A version's identity is its bytes and how they were read (docs/architecture.md, "Dedup,
-- identity and versions"): its projection fingerprint (BLAKE3 of `identity`), the identity
-- itself (canonical JSON: worker, projection version, parser versions, format, effective
-- options) and why it superseded the version before it (`content`, `options`, `projection`,
-- `restored`; NULL for a source's first version). Versions written before this migration have
-- none: they count as another projection. A job remembers the fingerprint its request expects,
-- so request-level dedup matches an active job of the same bytes *and* fingerprint.
ALTER TABLE source_versions ADD COLUMN fingerprint BLOB;
ALTER TABLE source_versions ADD COLUMN identity TEXT;
ALTER TABLE source_versions ADD COLUMN reason TEXT;
ALTER TABLE jobs ADD COLUMN fingerprint BLOB;
