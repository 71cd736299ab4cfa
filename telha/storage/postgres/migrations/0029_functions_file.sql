-- The engine's functions and triggers now live in one file, telha/storage/postgres/functions.sql,
-- which the migrator applies after the migrations on every migrate (docs/architecture.md,
-- "Where the SQL lives"). Every signature an earlier migration shipped and that file no
-- longer defines goes: the enqueue, commit and lease signatures superseded since, the lease
-- without its fair pick, the commit's check and rows (one function now), and the fair lease
-- that read a fixed number of heads (it takes the number now), and the single-shot commit of
-- 50 positional parameters (it takes a version and one array of rows per table now, of the
-- row types below). A store migrated from any earlier version ends with what a new store has
-- (tests/integration/test_schema_snapshot.py).
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
DROP FUNCTION IF EXISTS telha_commit_single(bytea, integer, bigint[], integer, bytea, bytea[],
    bigint, bytea, text, text, text, bytea, bytea, bigint, text, bytea, bytea, bigint, bytea,
    bytea, integer[], bytea[], bytea[], text[], bytea[], bytea[], bytea[], bigint[], bigint[],
    bytea[], text[], bytea[], bytea[], text[], bytea[], bytea[], bytea[], bytea[], bytea[],
    bigint[], bigint[], text[], bytea[], bytea[], bytea[], text[], bytea[], float8[], float8[],
    text[]);

-- The rows telha_commit_single takes, by name: a version's facts, then one type per table in
-- the column order of telha.domain.rows.build_rows's tuples (telha/storage/postgres/rows.py
-- writes the same tuples through the general path).
CREATE TYPE telha_version_row AS (
    name text, format text, content_hash bytea, canonical_text_hash bytea, size bigint,
    worker text, job_id bytea, blob_id bytea, text_len bigint, root_node_id bytea,
    changes bytea
);
CREATE TYPE telha_chunk_row AS (scope_id integer, blob_id bytea, idx integer, data bytea);
CREATE TYPE telha_node_row AS (
    scope_id integer, node_id bytea, tx_from bigint, labels text, properties bytea,
    provenance bytea, source_id bytea, valid_from bigint, valid_to bigint, match_key bytea
);
CREATE TYPE telha_label_row AS (scope_id integer, label text, node_id bytea, tx_from bigint);
CREATE TYPE telha_edge_row AS (
    scope_id integer, edge_id bytea, tx_from bigint, type text, from_id bytea, to_id bytea,
    properties bytea, source_id bytea
);
CREATE TYPE telha_span_row AS (
    scope_id integer, source_id bytea, source_version_tx bigint, start bigint, "end" bigint,
    kind text, linked_nodes bytea
);
CREATE TYPE telha_ambiguity_row AS (
    scope_id integer, node_id bytea, tx bigint, source_id bytea, kind text, candidates bytea,
    detector_confidence float8, applied_candidate_confidence float8, severity_hint text
);
