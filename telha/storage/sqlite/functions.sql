-- Every trigger of the SQLite engine, as the code uses them now (docs/architecture.md, "Where
-- the SQL lives"). The migrator applies this file after the numbered migrations on every
-- migrate, in a transaction of its own
-- (telha/storage/sqlite/migrate.py): SQLite has no CREATE OR REPLACE TRIGGER, so each
-- trigger is dropped and created again. The migrations hold tables, indexes and data only.
-- A name in double braces is a statement the code names, filled in by
-- telha.storage.sqlite.migrate.functions (the scope_usage counter's, as PostgreSQL's).
-- schema.txt beside this file is the schema this gives; `make schema` writes it again.

-- A scope's stored bytes (telha.storage.quotas.limits.stored_bytes): every chunk written,
-- rewritten or deleted adds its difference to the scope's counter (one writer: shard 0).
DROP TRIGGER IF EXISTS blob_chunks_usage_ins;
DROP TRIGGER IF EXISTS blob_chunks_usage_upd;
DROP TRIGGER IF EXISTS blob_chunks_usage_del;
DROP TRIGGER IF EXISTS raw_chunks_usage_ins;
DROP TRIGGER IF EXISTS raw_chunks_usage_upd;
DROP TRIGGER IF EXISTS raw_chunks_usage_del;
CREATE TRIGGER blob_chunks_usage_ins AFTER INSERT ON blob_chunks BEGIN
    {{usage_insert}};
END;
CREATE TRIGGER blob_chunks_usage_upd AFTER UPDATE OF data ON blob_chunks BEGIN
    {{usage_update}};
END;
CREATE TRIGGER blob_chunks_usage_del AFTER DELETE ON blob_chunks BEGIN
    {{usage_delete}};
END;
CREATE TRIGGER raw_chunks_usage_ins AFTER INSERT ON raw_chunks BEGIN
    {{usage_insert}};
END;
CREATE TRIGGER raw_chunks_usage_upd AFTER UPDATE OF data ON raw_chunks BEGIN
    {{usage_update}};
END;
CREATE TRIGGER raw_chunks_usage_del AFTER DELETE ON raw_chunks BEGIN
    {{usage_delete}};
END;
