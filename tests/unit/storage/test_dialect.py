"""The dialect seam (docs/architecture.md, "The storage seam"): the storage written once for
both engines (``telha/storage/core`` and the aggregates' packages) never asks which engine
it runs on — it names a member of :class:`~telha.storage.core.dialect.Dialect`
— and SQLite's members run on a real SQLite database (PostgreSQL's run in the integration
tests on both engines)."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest

import telha.storage.core
from telha.storage.core.dialect import Dialect
from telha.storage.postgres.dialect import POSTGRES
from telha.storage.sqlite.dialect import SQLITE

STORAGE = Path(telha.storage.core.__file__).parent.parent
#: The engines' own packages, and ``open_store`` (``telha/storage/__init__.py``), which picks
#: one from the configuration: the only places that may know which engine they are.
ENGINES = ("sqlite", "postgres", "__init__.py")


#: Names of one engine's own objects: a shared module that compares with one of them is
#: asking which engine it runs on.
_ENGINE_NAMES = ("sqlite", "postgres", "search_fts", "search_tri")


def _engine_tests(path: Path) -> list[str]:
    """Places in ``path`` that test the engine: an attribute ``postgres`` read, a dialect's
    ``name`` read (the name is for logs and tests, never for choosing SQL), or a comparison
    with an engine's own name."""
    text = path.read_text()
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            if node.attr == "postgres" or (node.attr == "name" and owner.endswith("dialect")):
                lines.add(node.lineno)
        elif isinstance(node, ast.Compare):
            names = [c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
            if any(isinstance(n, str) and n in _ENGINE_NAMES for n in names):
                lines.add(node.lineno)
    rows = text.splitlines()
    return [f"{path.name}:{n}: {rows[n - 1].strip()}" for n in sorted(lines)]


def test_core_never_tests_the_engine() -> None:
    modules = sorted(
        p for p in STORAGE.rglob("*.py") if p.relative_to(STORAGE).parts[0] not in ENGINES
    )
    assert len(modules) > 60  # core and every aggregate, not an empty folder
    assert [place for path in modules for place in _engine_tests(path)] == []


def test_the_check_sees_an_engine_test(tmp_path: Path) -> None:
    module = tmp_path / "op.py"
    module.write_text(
        "def f(tx):\n"
        "    a = 1 if tx.postgres else 2\n"
        "    if 'search_fts' in tx.dialect.fts_tables:\n"
        "        return 0\n"
        "    return tx.dialect.name == 'sqlite'\n"
    )
    assert _engine_tests(module) == [
        "op.py:2: a = 1 if tx.postgres else 2",
        "op.py:3: if 'search_fts' in tx.dialect.fts_tables:",
        "op.py:5: return tx.dialect.name == 'sqlite'",
    ]


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES], ids=["sqlite", "postgres"])
def test_each_engine_has_every_member(dialect: Dialect) -> None:
    members = [m for m in vars(Dialect) if not m.startswith("_")]
    members += list(Dialect.__annotations__)
    assert members
    assert [m for m in members if not hasattr(dialect, m)] == []


@pytest.fixture
def conn() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB, j TEXT)")
    db.executemany(
        "INSERT INTO t VALUES (?, ?, ?)",
        [
            (1, b"ab", '{"content_b64": "eA=="}'),
            (2, b"\x00xyz", '["user:a", "group:b"]'),
            (3, b"", "not json"),
        ],
    )
    return db


def test_sqlite_members_run(conn: sqlite3.Connection) -> None:
    d = SQLITE
    rows = conn.execute(f"SELECT id FROM t WHERE {d.contains('b')} ORDER BY id", (b"xy",))
    assert rows.fetchall() == [(2,)]
    conn.execute(f"UPDATE t SET b = {d.blob_append('b')} WHERE id = 1", (b"\xff",))
    value = conn.execute(f"SELECT b, typeof(b), {d.byte_length}(b) FROM t WHERE id = 1")
    assert value.fetchone() == (b"ab\xff", "blob", 3)
    field = d.json_text_field("CAST(j AS BLOB)", "content_b64")
    fields = conn.execute(f"SELECT {field} FROM t ORDER BY id").fetchall()
    assert fields == [("eA==",), (None,), (None,)]  # a text that is not JSON reads NULL
    elements = d.json_text_elements("t.j", "e")
    member, params = d.any("e.value", ["group:b"], "text")
    seen = conn.execute(f"SELECT t.id FROM t, {elements} WHERE t.id = 2 AND {member}", params)
    assert seen.fetchall() == [(2,)]
    prefix, table, params = d.key_table("a, b", ("integer", "bytea"), [(1, b"x"), (3, b"y")])
    keys = conn.execute(f"{prefix}SELECT t.id FROM {table} JOIN t ON t.id = k.a", params)
    assert sorted(keys.fetchall()) == [(1,), (3,)]
    null_equal = conn.execute(f"SELECT NULL {d.null_equal} NULL").fetchone()
    assert null_equal == (1,)


def test_the_engines_split_a_version_read_as_their_indexes_need() -> None:
    assert SQLITE.version_halves("n") == (" AND n.tx_to IS NULL", " AND n.tx_to IS NOT NULL")
    assert POSTGRES.version_halves("n") == ("",)
    assert SQLITE.in_group == 500 and POSTGRES.in_group is None
    assert SQLITE.indexed_scope(5) and POSTGRES.indexed_scope(1 << 40)
    assert not SQLITE.indexed_scope(1 << 40)  # no rowid range: no index rows
    assert POSTGRES.ranked_window_sql([]) is None  # PostgreSQL ranks every match
