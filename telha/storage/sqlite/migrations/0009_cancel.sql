-- Cancelled jobs (docs/architecture.md, "A job's life and its lease"): `cancelled` is a
-- terminal job state beside `completed` and `dead`.
--
-- SQLite cannot alter a CHECK constraint, and rebuilding `jobs` would have to name every
-- column (dropping any a neighbouring migration added). Widening a CHECK changes nothing on
-- disk and every existing row satisfies the wider one, so the table's stored definition is
-- edited in place, as https://www.sqlite.org/lang_altertable.html ("Making Other Kinds Of
-- Table Schema Changes") describes: `writable_schema = RESET` reloads this connection's
-- schema, and the throwaway table bumps the schema cookie so other connections reload it.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
SET sql = replace(sql, 'CHECK (state IN (''pending'', ''leased'', ''completed'', ''dead''))',
                  'CHECK (state IN (''pending'', ''leased'', ''completed'', ''dead'', ''cancelled''))')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x INTEGER);
DROP TABLE schema_cookie_bump;

