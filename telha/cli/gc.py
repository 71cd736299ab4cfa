"""``telha gc`` (docs/cli-and-client.md, docs/operations.md "Retention"): one retention
pass over the store the config names — the jobs that ended more than ``jobs.retain_days``
ago and the raw uploads nothing names any more — printing what it removed. Safe beside a
running ``telha serve`` (whose own collector does the same every ``jobs.gc_interval_s``)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import click

from telha.cli.config import load_or_exit
from telha.cli.plural import plural
from telha.domain.errors import StorageError
from telha.domain.ids import now_us

if TYPE_CHECKING:  # the store's stack is imported when ``gc`` runs, not by ``--help``
    from telha.storage.api import RetentionResult

__all__ = ["gc"]


def format_result(done: RetentionResult) -> list[str]:
    """The counts, one ``name<TAB>value`` line each (bytes exact), for ``telha gc``."""
    return [
        f"jobs\t{done.jobs}",
        f"events\t{done.events}",
        f"raw_blobs\t{done.raw_blobs}",
        f"raw_bytes\t{done.raw_bytes}",
        f"payload_bytes\t{done.payload_bytes}",
        f"bytes_freed\t{done.bytes_freed}",
    ]


@click.command("gc")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="config.toml (default: ./config.toml when present, else built-in defaults)",
)
@click.option("--dry-run", is_flag=True, help="count what would be removed, remove nothing")
def gc(config_path: Path | None, dry_run: bool) -> None:
    """Remove the jobs that ended more than jobs.retain_days ago (with their events) and the
    raw uploads nothing names any more; print the counts and the bytes freed. Jobs a source
    version names, versions and the graph are kept."""
    from telha.retention.collector import cutoff_us, run_pass
    from telha.storage import open_store

    cfg, base_dir = load_or_exit(config_path)
    if cfg.jobs.retain_days == 0:
        click.echo("telha gc: jobs.retain_days = 0 keeps every job; nothing removed")
        return
    now = now_us()
    before = datetime.fromtimestamp(cutoff_us(cfg.jobs.retain_days, now) / 1e6, UTC)

    async def run() -> tuple[RetentionResult, str]:
        async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
            return await run_pass(store, cfg.jobs, now=now, dry_run=dry_run), store.location

    try:
        done, location = anyio.run(run, backend="asyncio")
    except StorageError as exc:
        click.echo(f"telha: storage error: {exc.message}", err=True)
        sys.exit(1)
    for line in format_result(done):
        click.echo(line)
    verb = "would remove" if dry_run else "removed"
    click.echo(
        f"telha gc: {verb} {plural(done.jobs, 'job')} ended before"
        f" {before.isoformat(timespec='seconds')} and {plural(done.raw_blobs, 'raw upload')},"
        f" {plural(done.bytes_freed, 'byte')}"
        f" ({cfg.storage.engine} {location})"
    )
