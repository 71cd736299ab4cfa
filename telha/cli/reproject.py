"""``telha reproject`` (docs/cli-and-client.md, "Re-projection"): read a scope's outdated
current versions again from their stored raw bytes, over
:meth:`telha.client.AsyncTelha.reproject`.

Prints one line per outdated version (``reason  format  sourceId  name  jobId``; ``-`` for
no job: a dry run), then one ``raw-gone`` line per outdated version whose bytes are gone,
then a summary on stderr. With ``--wait`` it follows the jobs and prints progress
(``reproject: N of M done``) until each has ended, exiting 1 when any did not complete.
"""

from __future__ import annotations

import sys

import anyio
import click

from telha.cli.client import _KEY, _URL, _call
from telha.client import AsyncTelha, OutdatedOut, ReprojectOut

__all__ = ["reproject"]

#: Jobs followed at once with ``--wait``.
_FOLLOW = 8


def _line(o: OutdatedOut, job: str | None) -> str:
    return "\t".join((o.reason, o.format, o.source_id, o.name, job or "-"))


async def _follow(client: AsyncTelha, job_ids: list[str]) -> int:
    """Wait for every job (at most :data:`_FOLLOW` at once), printing progress on stderr;
    returns how many did not complete."""
    done = failed = 0
    limit = anyio.CapacityLimiter(_FOLLOW)

    async def one(job_id: str) -> None:
        nonlocal done, failed
        async with limit:
            status = await client.wait(job_id, stream=False, max_poll_s=0.5)
        done += 1
        failed += status.state != "completed"
        click.echo(f"reproject: {done} of {len(job_ids)} done", err=True)

    async with anyio.create_task_group() as tg:
        for job_id in job_ids:
            tg.start_soon(one, job_id)
    return failed


@click.command()
@click.option("--format", "fmt", default=None, help="only sources of this format")
@click.option("--source", "source_id", default=None, help="only this source (its UUID)")
@click.option("--dry-run", is_flag=True, help="list the outdated versions, enqueue nothing")
@click.option("--wait", "wait_", is_flag=True, help="follow the jobs until each has ended")
@_URL
@_KEY
def reproject(
    fmt: str | None, source_id: str | None, dry_run: bool, wait_: bool, url: str, api_key: str
) -> None:
    """Read again, from their stored raw bytes, the current versions made by an older
    projection or other options than a new ingest would use; erased and retired sources are
    never touched. Versions whose raw bytes are gone are listed (raw-gone), not failed."""

    async def run(client: AsyncTelha) -> tuple[ReprojectOut, int]:
        out = await client.reproject(fmt=fmt, source_id=source_id, dry_run=dry_run)
        jobs = [o.job_id for o in out.outdated if o.job_id]
        failed = await _follow(client, jobs) if wait_ and jobs else 0
        return out, failed

    out, failed = _call(url, api_key, run)
    for o in out.outdated:
        click.echo(_line(o, o.job_id))
    for o in out.raw_gone:
        click.echo("raw-gone\t" + _line(o, None))
    verb = "would read again" if dry_run else "enqueued"
    click.echo(
        f"reproject: {verb} {len(out.outdated)}, raw bytes gone {len(out.raw_gone)},"
        f" up to date {out.up_to_date}",
        err=True,
    )
    if failed:
        click.echo(f"reproject: {failed} jobs did not complete (telha jobs --state dead)", err=True)
        sys.exit(1)
