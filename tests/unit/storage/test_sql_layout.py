"""Where each engine's SQL lives (docs/architecture.md, "Where the SQL lives"): migrations hold
tables, indexes and data only, every function and trigger is in the engine's
``functions.sql`` once, each statement there safe to run again (it runs on every migrate).
A migration arriving with a function in it fails here: ``functions.sql`` runs after it and
would silently replace what it wrote."""

from __future__ import annotations

import re

import pytest

from telha.storage.core.migrations import fill
from telha.storage.core.sources import NOTE_VERSIONS
from telha.storage.jobs.statements import ACTIVE_FETCH
from telha.storage.postgres.functions import fills
from telha.storage.postgres.migrate import functions as pg_functions
from telha.storage.postgres.migrate import migrations as pg_migrations
from telha.storage.sqlite.migrate import functions as sqlite_functions
from telha.storage.sqlite.migrate import migrations as sqlite_migrations

#: A function, procedure or trigger created (a ``pg_temp`` helper of a data migration is not
#: kept, so it may stand in a migration).
CREATES = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE|TRIGGER)\s+(?!pg_temp\.)([\w.]+)",
    re.IGNORECASE,
)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_no_migration_defines_a_function_or_trigger(engine: str) -> None:
    shipped = sqlite_migrations() if engine == "sqlite" else pg_migrations()
    for _, name, sql in shipped:
        found = CREATES.findall(sql)
        assert not found, f"{name} defines {found}: put them in {engine}/functions.sql"


def test_postgres_functions_are_each_defined_once_and_replaceable() -> None:
    sql = pg_functions()
    names = CREATES.findall(sql)
    assert len(names) == len(set(names)) >= 6
    statements = re.findall(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|TRIGGER)", sql)
    assert all("OR REPLACE" in s for s in statements), statements
    assert not re.search(r"\bLIMIT\s+(?!1\b)\d", sql), "a limit the code names comes as a parameter"


def test_sqlite_triggers_are_each_dropped_before_they_are_created() -> None:
    sql = sqlite_functions()
    names = CREATES.findall(sql)
    assert len(names) == len(set(names)) >= 6
    dropped = re.findall(r"DROP TRIGGER IF EXISTS (\w+);", sql)
    assert sorted(dropped) == sorted(names)
    for name in names:
        assert sql.index(f"DROP TRIGGER IF EXISTS {name};") < sql.index(f"CREATE TRIGGER {name}")


def test_postgres_functions_run_the_general_paths_statements() -> None:
    """Every statement ``functions.sql`` shares with telha.storage.core is filled in from
    there (telha.storage.postgres.functions): no placeholder is left, each fill stands in the
    applied text with all its ``?`` replaced, and a statement edited in the core is the one
    the functions run."""
    sql = pg_functions()
    assert "{{" not in sql and "}}" not in sql
    for name, text in fills().items():
        assert "?" not in text, name
        assert text in sql, name
    assert NOTE_VERSIONS.split(" ?", 1)[0] in sql
    assert fill(ACTIVE_FETCH, "p_scope", "p_source", "p_format") in sql


def test_fill_replaces_each_placeholder_in_order() -> None:
    assert fill("a = ? AND b = ?", "p_a", "x.b") == "a = p_a AND b = x.b"
    with pytest.raises(ValueError, match="2 placeholders for 1"):
        fill("a = ? AND b = ?", "p_a")
