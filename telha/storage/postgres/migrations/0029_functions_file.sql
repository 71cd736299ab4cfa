-- The engine's functions and triggers now live in one file, telha/storage/postgres/functions.sql,
-- which the migrator applies after the migrations on every migrate (docs/architecture.md,
-- "Where the SQL lives"). Every signature an earlier migration shipped and that file no
-- longer defines goes: the enqueue, commit and lease signatures superseded since, the lease
-- without its fair pick, the commit's check and rows (one function now), and the fair lease
-- that read a fixed number of heads (it takes the number now). A store migrated from any
-- earlier version ends with what a new store has (tests/integration/test_schema_snapshot.py).
DROP FUNCTION IF EXISTS telha_enqueue(bytea, integer, text, text, bytea, bytea, bytea, bigint,
    boolean, text, bigint, text);
DROP FUNCTION IF EXISTS telha_enqueue(bytea, integer, text, text, bytea, bytea, bytea, bigint,
    boolean, text, bigint, text, text);
DROP FUNCTION IF EXISTS telha_lease(text[], bigint, text, bigint, integer);
DROP FUNCTION IF EXISTS telha_lease_fair(text[], bigint, text, bigint, integer);
DROP FUNCTION IF EXISTS telha_commit_check(bytea, integer, bigint[], integer, bytea);
DROP FUNCTION IF EXISTS telha_commit_single(bytea, integer, bigint[], integer, bytea, bytea[],
    bigint, bytea, text, text, text, bytea, bytea, bigint, text, bytea, bytea, bigint,
    integer[], bytea[], bytea[], text[], bytea[], bytea[], bytea[], bigint[], bigint[], text[],
    bytea[], bytea[], text[], bytea[], bytea[], bytea[], bytea[], bigint[], bigint[], text[],
    bytea[], bytea[], bytea[], text[], bytea[], float8[], float8[], text[]);
DROP FUNCTION IF EXISTS telha_commit_rows(bytea, integer, bigint[], integer, bytea, bytea[],
    bigint, bytea, text, text, text, bytea, bytea, bigint, text, bytea, bytea, bigint, bytea,
    bytea, integer[], bytea[], bytea[], text[], bytea[], bytea[], bytea[], bigint[], bigint[],
    bytea[], text[], bytea[], bytea[], text[], bytea[], bytea[], bytea[], bytea[], bytea[],
    bigint[], bigint[], text[], bytea[], bytea[], bytea[], text[], bytea[], float8[], float8[],
    text[]);
