"""First planner statistics for a new database (docs/operations.md, "Running on
PostgreSQL").

PostgreSQL's autovacuum analyzes a table only when its launcher visits the database, about
once per ``autovacuum_naptime`` (a minute by default). Until a table's first ``ANALYZE``
(``pg_class.reltuples = -1``) the planner guesses from defaults, and some guesses are bad
for a table that grows fast: a lookup of one source's versions by ``(scope_id,
source_id)`` took the narrower ``(scope_id, tx)`` index and read every version of the
scope (1.4 ms per publish at 3,000 versions, growing with each), and the fair lease
aggregated every pending job. So a store analyzes each of its tables that was never
analyzed once it has seen :data:`MIN_CHANGES` row changes; from then on autovacuum keeps
the statistics current.
"""

from __future__ import annotations

import anyio
import anyio.abc
import asyncpg
import structlog

from telha.storage.postgres.tx import Conn

__all__ = ["MIN_CHANGES", "FirstAnalyze", "analyze_new_tables"]

log = structlog.get_logger("telha.storage")

#: Row changes (inserts, updates, deletes) a never-analyzed table waits for before its
#: first ``ANALYZE``: below this the default guesses cost little.
MIN_CHANGES = 500
#: Seconds between looks at the catalog.
CHECK_S = 5.0

_NEVER_ANALYZED = """
SELECT format('%I.%I', s.schemaname, s.relname)
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND c.reltuples < 0 AND s.n_mod_since_analyze >= $1
ORDER BY s.relname
"""


async def analyze_new_tables(conn: Conn, min_changes: int = MIN_CHANGES) -> list[str]:
    """``ANALYZE`` every table of the current schema that was never analyzed (nor vacuumed)
    and has had at least ``min_changes`` row changes; returns their qualified names.

    :raises asyncpg.PostgresError: the catalog could not be read or a table analyzed.
    """
    tables = [str(r[0]) for r in await conn.fetch(_NEVER_ANALYZED, min_changes)]
    for table in tables:
        await conn.execute(f"ANALYZE {table}")  # names quoted by format('%I')
    return tables


class FirstAnalyze:
    """Looks every ``check_s`` seconds for tables that need their first ``ANALYZE``
    (:func:`analyze_new_tables`), on a connection of ``pool``.

    :param pool: the store's connection pool.
    :param check_s: seconds between looks.
    """

    def __init__(self, pool: asyncpg.Pool, *, check_s: float = CHECK_S) -> None:
        self._pool = pool
        self._check_s = check_s

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Actor body until cancelled; a failed look is logged and tried again next time
        (autovacuum still analyzes the table on its own schedule)."""
        task_status.started()
        while True:
            try:
                async with self._pool.acquire() as conn:
                    tables = await analyze_new_tables(conn)
                if tables:
                    log.info("tables_analyzed", tables=tables)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
                log.warning("analyze_failed", error=str(exc))
            await anyio.sleep(self._check_s)
