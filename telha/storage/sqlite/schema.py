"""The SQLite schema as normalized text: every entry of ``sqlite_master`` (tables, indexes,
triggers, views, the full-text index's tables) with its SQL, comments dropped and white space
collapsed, sorted by kind and name.

``schema.txt`` beside this module is that text for a freshly migrated database;
``scripts/schema_snapshot.py`` (``make schema``) writes it, and
``tests/integration/test_schema_snapshot.py`` compares it with fresh and upgraded stores
(docs/architecture.md, "Where the SQL lives")."""

from __future__ import annotations

import re
import sqlite3

__all__ = ["describe"]

_COMMENT = re.compile(r"--[^\n]*")
_SPACE = re.compile(r"\s+")
_TIGHT = re.compile(r"\s*([(),;])\s*")


def describe(conn: sqlite3.Connection) -> str:
    """The schema of ``conn``'s main database, one line per object.

    :returns: the text, ending in a newline.
    :raises sqlite3.Error: the schema could not be read.
    """
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
        " WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
    ).fetchall()
    out = []
    for kind, name, table, sql in rows:
        text = _TIGHT.sub(r"\1 ", _SPACE.sub(" ", _COMMENT.sub("", sql or ""))).strip()
        out.append(f"{kind} {name} on {table}: {text}")
    return "\n".join(out) + "\n"
