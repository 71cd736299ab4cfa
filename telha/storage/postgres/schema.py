"""The PostgreSQL schema as normalized text (tables with their columns, constraints, indexes
and triggers; sequences, views and types; functions with their definitions; the extensions
by name, their own objects left out), read from
``pg_catalog`` so that no ``pg_dump`` of a matching version is needed.

``schema.txt`` beside this module is that text for a freshly migrated database;
``scripts/schema_snapshot.py`` (``make schema``) writes it, and
``tests/integration/test_schema_snapshot.py`` compares it with fresh and upgraded stores
(docs/architecture.md, "Where the SQL lives")."""

from __future__ import annotations

import asyncpg
from asyncpg.pool import PoolConnectionProxy

__all__ = ["describe"]

_KINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized view", "S": "sequence"}


async def describe(
    conn: asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record],
) -> str:
    """The current schema's objects, one block each, sorted by name; names are written
    without their schema.

    :returns: the text, ending in a newline.
    :raises asyncpg.PostgresError: the catalog could not be read.
    """
    schema = str(await conn.fetchval("SELECT current_schema()"))
    out: list[str] = []
    relations = await conn.fetch(
        "SELECT c.oid, c.relname, c.relkind::text, c.reloptions FROM pg_class c"
        " WHERE c.relnamespace = current_schema()::regnamespace"
        " AND c.relkind IN ('r', 'p', 'v', 'm', 'S') ORDER BY c.relname"
    )
    for oid, name, kind, options in relations:
        out.append(f"{_KINDS[kind]} {name}" + (f" with {sorted(options)}" if options else ""))
        if kind in ("v", "m"):
            out.append("  " + str(await conn.fetchval("SELECT pg_get_viewdef($1)", oid)))
        out += await _columns(conn, oid)
        for con, definition in await conn.fetch(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1"
            " ORDER BY conname",
            oid,
        ):
            out.append(f"  constraint {con} {definition}")
        for (definition,) in await conn.fetch(
            "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class x"
            " ON x.oid = i.indexrelid WHERE i.indrelid = $1 ORDER BY x.relname",
            oid,
        ):
            out.append(f"  {definition}")
        for (definition,) in await conn.fetch(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = $1"
            " AND NOT tgisinternal ORDER BY tgname",
            oid,
        ):
            out.append(f"  {definition}")
    for name, kind, oid in await conn.fetch(
        "SELECT t.typname, t.typtype::text, t.typrelid FROM pg_type t"
        " WHERE t.typnamespace = current_schema()::regnamespace"
        " AND (t.typtype = 'e' OR (t.typtype = 'c' AND"
        " (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c'))"
        " ORDER BY t.typname"
    ):
        out.append(f"type {name}")
        out += await _columns(conn, oid) if kind == "c" else []
    for (name,) in await conn.fetch(
        "SELECT extname FROM pg_extension WHERE extname <> 'plpgsql' ORDER BY 1"
    ):
        out.append(f"extension {name}")
    for signature, definition in await conn.fetch(
        "SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid) FROM pg_proc p"
        " WHERE p.pronamespace = current_schema()::regnamespace AND NOT EXISTS"
        " (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass"
        " AND d.objid = p.oid AND d.deptype = 'e') ORDER BY 1"
    ):
        out.append(f"function {signature}")
        out += ["  " + line.rstrip() for line in str(definition).strip().splitlines()]
    text = "\n".join(line.rstrip() for line in out) + "\n"
    return text.replace(f"{schema}.", "")


async def _columns(
    conn: asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record], oid: int
) -> list[str]:
    """One line per column of relation ``oid``, in column order."""
    rows = await conn.fetch(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,"
        " pg_get_expr(d.adbin, d.adrelid),"
        " CASE WHEN a.attcollation <> t.typcollation THEN co.collname END"
        " FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
        " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
        " LEFT JOIN pg_collation co ON co.oid = a.attcollation"
        " WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        oid,
    )
    lines = []
    for name, typ, notnull, default, collation in rows:
        line = f"  column {name} {typ}"
        line += f' collate "{collation}"' if collation else ""
        line += " not null" if notnull else ""
        line += f" default {default}" if default is not None else ""
        lines.append(line)
    return lines
