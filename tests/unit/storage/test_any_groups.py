"""``any_groups``: the IN-list grouping every storage operation uses (docs/architecture.md,
"The storage seam") — at most the dialect's ``in_group`` values per statement on SQLite, one
array on PostgreSQL, no statement for no values; every value in exactly one group."""

from __future__ import annotations

import sqlite3
from typing import Any, cast

from telha.storage.core.tx import Tx, any_groups, drive
from telha.storage.postgres.tx import PgTx
from telha.storage.sqlite.dialect import SQLITE
from telha.storage.sqlite.tx import SqliteTx

IN_GROUP = SQLITE.in_group or 0


def _sqlite() -> SqliteTx:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(3000)])
    return SqliteTx(conn, known=lambda c, s: None)


def test_sqlite_groups_hold_at_most_in_group_values_and_find_every_row() -> None:
    tx = _sqlite()
    values = list(range(0, 2 * IN_GROUP + 201))
    groups = any_groups(cast(Tx, tx), "id", values, "bigint")
    assert [len(params) for _, params in groups] == [IN_GROUP, IN_GROUP, 201]
    found: list[Any] = []
    for cond, params in groups:
        found += drive(tx.fetchall(f"SELECT id FROM t WHERE {cond} ORDER BY id", *params))
    assert [r[0] for r in found] == values


def test_postgres_sends_one_array_and_no_values_run_no_statement() -> None:
    pg = PgTx(cast(Any, None), {})
    values = list(range(2 * IN_GROUP + 201))
    assert any_groups(cast(Tx, pg), "id", values, "bigint") == [
        ("id = ANY(?::bigint[])", (values,))
    ]
    assert any_groups(cast(Tx, pg), "id", [], "bigint") == []
    assert any_groups(cast(Tx, _sqlite()), "id", [], "bigint") == []
