"""The listing commands of ``telha`` (docs/cli-and-client.md): ``sources`` and ``jobs``,
a page at a time over :meth:`telha.client.AsyncTelha.sources_page` and
:meth:`~telha.client.AsyncTelha.jobs_page`.

Each prints the newest first, at most ``--limit`` rows, as a table on a terminal and as TSV
with a header line when stdout is not one (dead jobs, and sources whose last job died, in
red); when more rows match, a last line on stderr says so. An error answer prints ``telha:
CODE: message`` on stderr and exits 1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

import click
from rich.console import Console
from rich.table import Table

from telha.cli.client import _KEY, _URL, _call
from telha.client import AsyncTelha, JobSummaryOut, SourceSummaryOut

_R = TypeVar("_R")

__all__ = ["jobs", "sources"]

_LIMIT = click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(1, 100_000),
    help="print at most this many, newest first",
)  # fmt: skip


def _print(columns: tuple[str, ...], rows: Sequence[Sequence[str]], red: Sequence[bool]) -> None:
    """``rows`` under ``columns``: a table on a terminal, else TSV with a header line."""
    console = Console()
    if not console.is_terminal:
        for row in (columns, *rows):
            click.echo("\t".join(cell.replace("\t", " ") for cell in row))
        return
    table = Table(*columns)
    for row, bad in zip(rows, red, strict=True):
        table.add_row(*row, style="red" if bad else None)
    console.print(table)


def _page_size(limit: int) -> int:
    """Rows a page asks for: what ``--limit`` needs plus one (whether more match), at most
    the server's 1000."""
    return min(limit + 1, 1000)


async def _first(rows: AsyncIterator[_R], n: int) -> list[_R]:
    """The first ``n`` of ``rows`` (a listing over all pages), asking for no page beyond."""
    found: list[_R] = []
    async for row in rows:
        found.append(row)
        if len(found) >= n:
            break
    return found


def _more(shown: int, more: bool) -> None:
    if more:
        click.echo(f"telha: more than {shown} match; raise --limit to see them", err=True)


@click.command()
@click.option("--prefix", default=None, help="only names starting with this")
@click.option("--format", "fmt", default=None, help="only this format")
@click.option("--state", default=None, help="pending, current, retired or erased")
@_LIMIT
@_URL
@_KEY
def sources(
    prefix: str | None, fmt: str | None, state: str | None, limit: int, url: str, api_key: str
) -> None:
    """List the scope's sources, newest change first: each one's state (pending: jobs only,
    dead ones included), format, versions, last job's state, id and name."""

    async def take(client: AsyncTelha) -> list[SourceSummaryOut]:
        rows = client.list_sources(
            prefix=prefix, format=fmt, state=state, page_size=_page_size(limit)
        )
        return await _first(rows, limit + 1)

    found = _call(url, api_key, take)
    shown = found[:limit]
    columns = ("state", "format", "versions", "last job", "source id", "name")
    rows = [(s.state, s.format, str(s.version_count), s.last_job_state or "-", s.source_id,
             s.name) for s in shown]  # fmt: skip
    _print(columns, rows, [s.last_job_state == "dead" for s in shown])
    _more(len(shown), len(found) > limit)


@click.command()
@click.option("--state", default=None, help="pending, leased, completed, dead or cancelled")
@click.option("--kind", default=None, help="ingest:<format> or erase")
@click.option("--source", "source_id", default=None, help="only this source's jobs")
@click.option("--parent", default=None, help="only the jobs this job's completion enqueued")
@_LIMIT
@_URL
@_KEY
def jobs(
    state: str | None,
    kind: str | None,
    source_id: str | None,
    parent: str | None,
    limit: int,
    url: str,
    api_key: str,
) -> None:
    """List the scope's jobs, newest first: each one's state, kind, attempts, id, name and
    failure."""

    async def take(client: AsyncTelha) -> list[JobSummaryOut]:
        rows = client.list_jobs(
            state=state, kind=kind, source_id=source_id, parent=parent,
            page_size=_page_size(limit),
        )  # fmt: skip
        return await _first(rows, limit + 1)

    found = _call(url, api_key, take)
    shown = found[:limit]
    columns = ("state", "kind", "attempts", "job id", "name", "failure")
    rows = [(j.state, j.kind, str(j.attempts), j.job_id, j.name or "-", j.failure_reason or "")
            for j in shown]  # fmt: skip
    _print(columns, rows, [j.state == "dead" for j in shown])
    _more(len(shown), len(found) > limit)
