"""Each engine's SQL (docs/architecture.md, "Where the SQL lives"): its numbered migrations
(``<engine package>/migrations/NNNN_name.sql``), tables, indexes and data only, applied in
order and once each; then its functions and triggers (``<engine package>/functions.sql``),
applied whole after the migrations on every migrate.

A shipped migration's effect on tables and data never changes (a store records only the
numbers it applied, no checksum): a change is a new migration. A migration defines no
function or trigger (``tests/unit/storage/test_sql_layout.py``): those are edited in place in
``functions.sql``, and a migration drops a signature that file no longer defines.

A ``{{name}}`` in a ``functions.sql`` stands for a statement the engine's code names (see
:func:`functions_sql`): a statement of the general path, or one both engines' triggers run,
written once in Python with its ``?`` placeholders filled by :func:`fill`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

from telha.domain.errors import StorageError

__all__ = ["fill", "functions_sql", "has_statements", "numbered_migrations", "require_current"]

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_FILL = re.compile(r"\{\{(\w+)\}\}")


def numbered_migrations(package: str) -> list[tuple[int, str, str]]:
    """The migrations shipped in ``package`` as ``(number, file name, sql)``, by number."""
    found = []
    for entry in resources.files(package).joinpath("migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def has_statements(sql: str) -> bool:
    """Whether ``sql`` holds anything but ``--`` comment lines and blanks (a migration whose
    functions moved to ``functions.sql`` may hold only its comment; PostgreSQL's driver
    refuses an empty query)."""
    return any(line.strip() and not line.lstrip().startswith("--") for line in sql.splitlines())


def functions_sql(package: str, fills: Mapping[str, str]) -> str:
    """The text of ``package``'s ``functions.sql``: every function and trigger of the engine,
    each statement safe to run again (``CREATE OR REPLACE``, or a drop before the create),
    each ``{{name}}`` replaced by ``fills[name]``.

    :raises ValueError: a ``{{name}}`` without a fill, or a fill used nowhere.
    """
    text = resources.files(package).joinpath("functions.sql").read_text(encoding="utf-8")
    used = set(_FILL.findall(text))
    if used != fills.keys():
        raise ValueError(
            f"{package} functions.sql: unfilled {sorted(used - fills.keys())},"
            f" unused {sorted(fills.keys() - used)}"
        )
    return _FILL.sub(lambda m: fills[m.group(1)], text)


def fill(statement: str, *exprs: str) -> str:
    """``statement`` (``?`` placeholders, none inside a literal) with its placeholders
    replaced, in order, by the SQL expressions ``exprs`` (a function's parameters and
    variables, a trigger's ``NEW.…``).

    :raises ValueError: ``statement`` has not one placeholder per expression.
    """
    parts = statement.split("?")
    if len(parts) != len(exprs) + 1:
        raise ValueError(f"{len(parts) - 1} placeholders for {len(exprs)} expressions")
    return parts[0] + "".join(f"{expr}{part}" for expr, part in zip(exprs, parts[1:], strict=True))


def require_current(location: str, current: int, package: str) -> None:
    """Check a store opened read-only against this build's schema.

    :raises StorageError: ``current`` (the store's schema version) is older than the newest
        migration in ``package``.
    """
    latest = numbered_migrations(package)[-1][0]
    if current < latest:
        raise StorageError(
            f"{location} has schema version {current}, this build needs {latest}"
            " (run `telha migrate`)"
        )
