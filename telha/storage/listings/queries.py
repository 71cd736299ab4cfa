"""The listings, written once for both engines (docs/rest-api.md): a scope's
sources by last change and its jobs by creation, newest first, paged by keyset (strictly
after the last row of the previous page), each filter read through its own index:

=================  ==========================================================
sources            ``sources_by_change``; ``state``: ``sources_by_state``;
                   ``format``: ``sources_by_format``; ``prefix``: counted in
                   ``sources_by_name``, then a range of it sorted (few
                   names) or the order walked (many)
jobs               ``jobs_by_scope``; ``state``: ``jobs_by_state``; ``kind``:
                   ``jobs_by_kind``; ``sourceId``: ``jobs_by_source``;
                   ``parent``: ``jobs_by_parent``
=================  ==========================================================

A listed source's last job state is read from the job's row (a primary-key probe per row),
so a job's transitions never rewrite its source's row. ``tests/integration/test_listings.py``
holds SQLite's query plans to these indexes.
"""

from __future__ import annotations

from typing import Any

from telha.domain.listings import (
    JobFamily,
    JobFilter,
    JobSummary,
    Page,
    SourceFilter,
    SourceSummary,
    VersionParent,
)
from telha.domain.model import Scope
from telha.storage.core.dialect import Dialect
from telha.storage.core.tx import Tx
from telha.storage.reads.acl import admitted

__all__ = [
    "JOB_FAMILY_SQL",
    "PREFIX_SORTED_MAX",
    "SOURCE_SUMMARY_SQL",
    "VERSION_PARENTS_SQL",
    "family_of",
    "job_family",
    "jobs_query",
    "list_jobs",
    "list_sources",
    "name_range",
    "prefix_count_query",
    "source_summary",
    "sources_query",
    "version_parents",
]

_SOURCE_SELECT = (
    "SELECT s.source_id, s.name, s.format, s.state, s.latest_tx, s.version_count,"
    " s.last_job_id, j.state, s.changed_at"
    " FROM sources s LEFT JOIN jobs j ON j.job_id = s.last_job_id"
)
_JOB_SELECT = (
    "SELECT j.job_id, j.kind, j.state, j.source_id, coalesce(j.name, s.name), j.attempts,"
    " j.created_at, j.updated_at, j.failure_reason, j.parent_job_id"
    " FROM jobs j LEFT JOIN sources s ON s.scope_id = j.scope_id AND s.source_id = j.source_id"
)
#: One source's row (:func:`source_summary`): ``(scope id, source id)``.
SOURCE_SUMMARY_SQL = f"{_SOURCE_SELECT} WHERE s.scope_id = ? AND s.source_id = ?"
#: A job's children counted by state (:func:`job_family`): ``(job id)``.
JOB_FAMILY_SQL = (
    "SELECT state, count(*) FROM jobs WHERE parent_job_id = ? GROUP BY state ORDER BY state"
)
#: Names with a prefix read by name and sorted, at most; more are found by walking the
#: listing's order (:func:`list_sources`).
PREFIX_SORTED_MAX = 2000
_MAX_CHAR = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def name_range(prefix: str) -> tuple[str, str | None]:
    """``[low, high)``: the names that start with ``prefix``, as a range of names compared
    code point by code point (byte-wise in UTF-8: SQLite's ``BINARY``, PostgreSQL's
    ``COLLATE "C"``). ``high`` is ``None`` when no name is above the range."""
    chars = list(prefix)
    while chars and ord(chars[-1]) == _MAX_CHAR:
        chars.pop()
    if not chars:
        return prefix, None
    nxt = ord(chars[-1]) + 1
    chars[-1] = chr(_SURROGATES.stop if nxt in _SURROGATES else nxt)
    return prefix, "".join(chars)


def _source(row: Any) -> SourceSummary:
    return SourceSummary(
        bytes(row[0]), row[1], row[2], row[3], row[4], int(row[5]),
        bytes(row[6]) if row[6] is not None else None, row[7], int(row[8]),
    )  # fmt: skip


def _job(r: Any) -> JobSummary:
    return JobSummary(
        bytes(r[0]), r[1], r[2], bytes(r[3]), r[4], int(r[5]), int(r[6]), int(r[7]), r[8],
        bytes(r[9]) if r[9] is not None else None,
    )  # fmt: skip


def _newest_first(
    sql: str,
    params: list[Any],
    page: Page,
    principals: tuple[str, ...] | None,
    alias: str,
    at: str,
    key: str,
    dialect: Dialect,
) -> tuple[str, list[Any]]:
    """``sql`` (over table ``alias``, its conditions so far) completed as one page of a
    listing, newest first: with ``principals``, only what their ACL admits
    (:func:`~telha.storage.reads.acl.admitted`); after the cursor's ``(at, key)``; ordered by
    ``at`` then ``key``, both descending; at most ``page.limit`` rows."""
    if principals is not None:
        seen, seen_params = admitted(alias, principals, dialect)
        sql += f" AND {seen}"
        params += seen_params
    if page.after is not None:
        sql += f" AND ({alias}.{at}, {alias}.{key}) < (?, ?)"
        params += [page.after[0], page.after[1]]
    sql += f" ORDER BY {alias}.{at} DESC, {alias}.{key} DESC LIMIT ?"
    return sql, [*params, page.limit]


def _name_terms(f: SourceFilter, column: str) -> tuple[str, list[Any]]:
    """The prefix filter as a range of ``column``."""
    assert f.prefix
    low, high = name_range(f.prefix)
    if high is None:
        return f" AND {column} >= ?", [low]
    return f" AND {column} >= ? AND {column} < ?", [low, high]


def sources_query(
    sid: int, f: SourceFilter, page: Page, dialect: Dialect, *, by_name: bool = False
) -> tuple[str, list[Any]]:
    """The SQL (``?`` placeholders) and parameters of :func:`list_sources` in scope ``sid``.
    A prefix is read either ``by_name`` (a range of ``sources_by_name``, its rows sorted:
    few rows have the prefix) or by walking the listing's order and skipping other names
    (many have it: the name column is hidden from the planner, ``name || ''``)."""
    table = "sources s"
    if f.prefix and by_name:
        table += dialect.indexed_by("sources_by_name")
    sql = _SOURCE_SELECT.replace("sources s", table, 1) + " WHERE s.scope_id = ?"
    params: list[Any] = [sid]
    if f.state is not None:
        sql += " AND s.state = ?"
        params.append(f.state)
    if f.format is not None:
        sql += " AND s.format = ?"
        params.append(f.format)
    if f.prefix:
        terms, values = _name_terms(f, "s.name" if by_name else "(s.name || '')")
        sql += terms
        params += values
    return _newest_first(sql, params, page, f.principals, "s", "changed_at", "source_id", dialect)


def prefix_count_query(sid: int, f: SourceFilter) -> tuple[str, list[Any]]:
    """How many of the scope's names have the prefix, counted up to
    :data:`PREFIX_SORTED_MAX` + 1 through ``sources_by_name`` (parameters included)."""
    terms, values = _name_terms(f, "name")
    sql = f"SELECT count(*) FROM (SELECT 1 FROM sources WHERE scope_id = ?{terms} LIMIT ?) p"
    return sql, [sid, *values, PREFIX_SORTED_MAX + 1]


async def list_sources(tx: Tx, scope: Scope, f: SourceFilter, page: Page) -> list[SourceSummary]:
    """The scope's sources, newest change first (``changed_at`` µs, then id, descending),
    strictly after ``page.after``, at most ``page.limit``. With a prefix, its names are
    counted first (at most :data:`PREFIX_SORTED_MAX` + 1 index entries): up to that many
    are read by name and sorted; more are common enough that walking the listing's order
    finds a page soon (at most ``limit`` × rows / :data:`PREFIX_SORTED_MAX` entries)."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    by_name = False
    if f.prefix:
        count_sql, count_params = prefix_count_query(sid, f)
        row = await tx.fetchone(count_sql, *count_params)
        by_name = row is not None and int(row[0]) <= PREFIX_SORTED_MAX
    sql, params = sources_query(sid, f, page, tx.dialect, by_name=by_name)
    return [_source(r) for r in await tx.fetchall(sql, *params)]


async def source_summary(tx: Tx, scope: Scope, source_id: bytes) -> SourceSummary | None:
    """One source's row, or ``None`` when the scope has no job and no version of it."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return None
    row = await tx.fetchone(SOURCE_SUMMARY_SQL, sid, source_id)
    return _source(row) if row is not None else None


def jobs_query(sid: int, f: JobFilter, page: Page, dialect: Dialect) -> tuple[str, list[Any]]:
    """The SQL (``?`` placeholders) and parameters of :func:`list_jobs` in scope ``sid``."""
    sql = f"{_JOB_SELECT} WHERE j.scope_id = ?"
    params: list[Any] = [sid]
    for column, value in (
        ("state", f.state),
        ("kind", f.kind),
        ("source_id", f.source_id),
        ("parent_job_id", f.parent),
    ):
        if value is not None:
            sql += f" AND j.{column} = ?"
            params.append(value)
    return _newest_first(sql, params, page, f.principals, "j", "created_at", "job_id", dialect)


async def list_jobs(tx: Tx, scope: Scope, f: JobFilter, page: Page) -> list[JobSummary]:
    """The scope's jobs, newest first (``created_at`` µs, then id, descending), strictly
    after ``page.after``, at most ``page.limit``."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return []
    sql, params = jobs_query(sid, f, page, tx.dialect)
    return [_job(r) for r in await tx.fetchall(sql, *params)]


async def job_family(tx: Tx, scope: Scope, job_id: bytes) -> JobFamily | None:
    """A job's parent and its children counted by state; ``None`` when the job is not in
    ``scope``."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return None
    row = await tx.fetchone(
        "SELECT parent_job_id FROM jobs WHERE job_id = ? AND scope_id = ?", job_id, sid
    )
    if row is None:
        return None
    return await family_of(tx, job_id, row[0])


async def family_of(tx: Tx, job_id: bytes, parent_job_id: bytes | None) -> JobFamily:
    """The family of a job already read (its ``parent_job_id`` column): the parent and its
    children counted by state."""
    counts = await tx.fetchall(JOB_FAMILY_SQL, job_id)
    parent = bytes(parent_job_id) if parent_job_id is not None else None
    return JobFamily(parent, {str(state): int(n) for state, n in counts})


#: Per published version of one source whose job has a parent: the version's tx, the parent
#: job, its source (id and name, from ``sources``) and the version that parent job wrote.
VERSION_PARENTS_SQL = (
    "SELECT v.tx, j.parent_job_id, p.source_id, s.name, pv.tx FROM source_versions v"
    " JOIN jobs j ON j.job_id = v.job_id"
    " LEFT JOIN jobs p ON p.job_id = j.parent_job_id"
    " LEFT JOIN sources s ON s.scope_id = p.scope_id AND s.source_id = p.source_id"
    " LEFT JOIN source_versions pv ON pv.scope_id = p.scope_id AND pv.source_id = p.source_id"
    " AND pv.job_id = p.job_id AND pv.published_tx IS NOT NULL"
    " WHERE v.scope_id = ? AND v.source_id = ? AND v.published_tx IS NOT NULL"
    " AND j.parent_job_id IS NOT NULL ORDER BY v.tx DESC, pv.tx DESC"
)


async def version_parents(tx: Tx, scope: Scope, source_id: bytes) -> dict[int, VersionParent]:
    """``{version tx: parent}`` of a source's published versions written by a child job
    (docs/rest-api.md, "Child jobs"); versions of a job a client enqueued are absent. Reads
    the versions by primary key, each job and parent job by primary key and the parent
    source's versions by primary-key range."""
    sid = await tx.known_scope_id(scope)
    if sid is None:
        return {}
    out: dict[int, VersionParent] = {}
    for at, parent, psource, pname, ptx in await tx.fetchall(VERSION_PARENTS_SQL, sid, source_id):
        if int(at) not in out:  # a parent job's newest version, if it wrote several
            out[int(at)] = VersionParent(
                bytes(parent), bytes(psource) if psource is not None else None, pname,
                int(ptx) if ptx is not None else None,
            )  # fmt: skip
    return out
