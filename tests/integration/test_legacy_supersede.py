"""Migration 6 on a store written before it (both engines): each source's latest version
supersedes the earlier versions' graph that the old code left current (docs/architecture.md,
"Versions and node identity"). The store is built with migrations 1–5 and raw rows shaped as
the old code wrote them."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
import pytest

from telha.storage.core.migrations import has_statements
from telha.storage.postgres.migrate import apply_migrations as pg_migrate
from telha.storage.postgres.migrate import migrations as pg_migrations
from telha.storage.sqlite.migrate import apply_migrations as sqlite_migrate
from telha.storage.sqlite.migrate import migrations as sqlite_migrations
from tests.support.pg import ENGINES, create_database, require_engine

pytestmark = pytest.mark.anyio

T1, T2 = 1_000_000, 2_000_000
SOURCE = uuid.uuid4().bytes
OLD = uuid.UUID("01a23218-6585-7281-b46e-aaa58bfb5cf4").bytes  # uuid7: written by v1 only
NEW = uuid.UUID("01a23218-6aec-76fe-840c-5ab332afd694").bytes  # uuid7: written by v2
KEPT = uuid.uuid5(uuid.NAMESPACE_URL, "kept").bytes  # worker id, unchanged in v2: v2 links it
GONE = uuid.uuid5(uuid.NAMESPACE_URL, "gone").bytes  # worker id v2 no longer has
H = b"\x01" * 32

VERSIONS = [(1, SOURCE, t, "s", "json", H, H, 1, None, None, None, 5) for t in (T1, T2)]
NODES = [
    (1, OLD, T1, None, None, None, '["X"]', b"{}", b"[[0,5]]", SOURCE),
    (1, KEPT, T1, None, None, None, '["P"]', b"{}", b"[[0,5]]", SOURCE),
    (1, GONE, T1, None, None, None, '["P"]', b"{}", b"[[0,5]]", SOURCE),
    (1, NEW, T2, None, None, None, '["X"]', b"{}", b"[[0,5]]", SOURCE),
]
LABELS = [(1, "P", KEPT, T1), (1, "P", GONE, T1), (1, "X", OLD, T1), (1, "X", NEW, T2)]
SPANS = [
    (1, SOURCE, T1, 0, 5, "body", OLD + KEPT + GONE),
    (1, SOURCE, T2, 0, 5, "body", NEW + KEPT),
]
EDGES = [(1, OLD, T1, None, "E", OLD, KEPT, b"{}"), (1, NEW, T2, None, "E", NEW, KEPT, b"{}")]
INSERTS = {
    "source_versions": VERSIONS,
    "nodes": NODES,
    "node_labels": LABELS,
    "span_rows": SPANS,
    "edges": EDGES,
}
COLUMNS = {
    "source_versions": "scope_id, source_id, tx, name, format, content_hash, canonical_text_hash,"
    " size, worker, job_id, blob_id, text_len",
    "nodes": "scope_id, node_id, tx_from, tx_to, valid_from, valid_to, labels, properties,"
    " provenance, source_id",
    "node_labels": "scope_id, label, node_id, tx_from",
    "span_rows": 'scope_id, source_id, source_version_tx, start, "end", kind, linked_nodes',
    "edges": "scope_id, edge_id, tx_from, tx_to, type, from_id, to_id, properties",
}


def _expect(nodes: list[Any], edges: list[Any]) -> None:
    got = {(bytes(n[0]), n[1]): (n[2], bytes(n[3])) for n in nodes}
    assert got == {
        (OLD, T1): (T2, b"[[0,5]]"),
        (KEPT, T1): (T2, b"[[0,5]]"),
        (KEPT, T2): (None, b"[[0,5]]"),  # a version of v2's, with v2's span
        (GONE, T1): (T2, b"[[0,5]]"),
        (NEW, T2): (None, b"[[0,5]]"),
    }
    assert sorted((bytes(e[0]), e[1]) for e in edges) == sorted([(OLD, T2), (NEW, None)])


@pytest.mark.parametrize("engine", ENGINES)
async def test_migration_6_supersedes_what_the_old_code_left_current(
    engine: str, tmp_path: Path
) -> None:
    require_engine(engine)
    nodes_sql = "SELECT node_id, tx_from, tx_to, provenance FROM nodes"
    edges_sql = "SELECT edge_id, tx_to FROM edges"
    if engine == "sqlite":
        path = tmp_path / "old.db"
        with sqlite3.connect(path) as db:
            db.execute(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at INTEGER NOT NULL)"
            )
            for number, name, sql in sqlite_migrations()[:5]:
                db.executescript(sql)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (number, name))
            for table, rows in INSERTS.items():
                marks = ", ".join("?" * len(rows[0]))
                db.executemany(f"INSERT INTO {table} ({COLUMNS[table]}) VALUES ({marks})", rows)
        async with aiosqlite.connect(path) as conn:
            assert await sqlite_migrate(conn) == [
                number for number, _, _ in sqlite_migrations()[5:]
            ]
            _expect(
                list(await conn.execute_fetchall(nodes_sql)),
                list(await conn.execute_fetchall(edges_sql)),
            )
        return
    conn = await asyncpg.connect(create_database())
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at bigint NOT NULL)"
        )
        for number, name, sql in pg_migrations()[:5]:
            if has_statements(sql):  # a migration whose functions moved may be comments only
                await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2, 0)", number, name)
        for table, rows in INSERTS.items():
            marks = ", ".join(f"${i + 1}" for i in range(len(rows[0])))
            await conn.executemany(f"INSERT INTO {table} ({COLUMNS[table]}) VALUES ({marks})", rows)
        assert await pg_migrate(conn) == [number for number, _, _ in pg_migrations()[5:]]
        _expect(list(await conn.fetch(nodes_sql)), list(await conn.fetch(edges_sql)))
    finally:
        await conn.close()
