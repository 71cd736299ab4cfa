"""``telha connector add|list|remove|token`` and ``telha sync`` (docs/connectors.md,
"CLI"): a scope's
connectors over REST (``add``, ``list``, ``remove``), and a connector token minted from the
store's token key (``token``, like ``telha api-key worker-token``)."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import click

from telha.cli.client import _KEY, _URL, _call
from telha.cli.config import CONFIG_OPTION, ORG_OPTION, TENANT_OPTION, run_on_store, scope_of
from telha.cli.keys import existing_store
from telha.cli.listings import _print
from telha.client import AsyncTelha, RunOut

__all__ = ["connector", "sync"]


@click.group("connector")
def connector() -> None:
    """Connectors: register, list, remove, mint a connector token."""


def _settings(
    raw: str, root: str | None, include: tuple[str, ...], exclude: tuple[str, ...]
) -> Any:
    try:
        settings = json.loads(raw)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--settings") from None
    if not isinstance(settings, dict):
        raise click.BadParameter("a JSON object", param_hint="--settings")
    if root is not None:
        settings["root"] = str(Path(root).resolve())
    if include:
        settings["include"] = list(include)
    if exclude:
        settings["exclude"] = list(exclude)
    return settings


@connector.command("add")
@click.argument("kind")
@click.option("--settings", "raw", default="{}", help="the kind's settings, a JSON object")
@click.option("--root", default=None, help="folder: the tree's root (made absolute)")
@click.option("--include", multiple=True, help="folder: a glob of paths to take (repeatable)")
@click.option("--exclude", multiple=True, help="folder: a glob of paths to skip (repeatable)")
@click.option("--every", default=None, help="run on a schedule: 15m, 1h, 1d (default: never)")
@click.option("--prune-max-fraction", type=float, default=None,
              help="most of its sources one run may retire unconfirmed (default 0.2)")  # fmt: skip
@_URL
@_KEY
def connector_add(
    kind: str,
    raw: str,
    root: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    every: str | None,
    prune_max_fraction: float | None,
    url: str,
    api_key: str,
) -> None:
    """Register a connector of KIND (``folder``); prints its id alone on stdout."""
    settings = _settings(raw, root, include, exclude)
    done = _call(
        url, api_key,
        lambda c: c.add_connector(
            kind, settings, every=every, prune_max_fraction=prune_max_fraction
        ),
    )  # fmt: skip
    click.echo(done.connector_id)


def _every(s: int | None) -> str:
    return "-" if s is None else f"{s}s"


@connector.command("list")
@_URL
@_KEY
def connector_list(url: str, api_key: str) -> None:
    """The scope's connectors, oldest first: id, kind, schedule, created (UTC), settings. A
    table on a terminal, TSV with a header line when piped."""
    rows = _call(url, api_key, lambda c: c.connectors())
    table = [
        [c.connector_id, c.kind, _every(c.every),
         datetime.fromtimestamp(c.created_at / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
         json.dumps(c.settings, sort_keys=True)]
        for c in rows
    ]  # fmt: skip
    _print(("id", "kind", "every", "created", "settings"), table, [False] * len(rows))


@connector.command("remove")
@click.argument("connector_id", metavar="ID")
@_URL
@_KEY
def connector_remove(connector_id: str, url: str, api_key: str) -> None:
    """Remove a connector: its tokens are refused and it runs no more; the sources it
    created stay. Prints ``ID  removed``."""
    done = _call(url, api_key, lambda c: c.remove_connector(connector_id))
    click.echo(f"{done.connector_id}  removed")


@connector.command("token")
@click.argument("connector_id", metavar="ID")
@TENANT_OPTION
@ORG_OPTION
@click.option("--ttl", default="30d", show_default=True, help="lifetime: 30d, 12h, 90m, 45s")
@CONFIG_OPTION
def connector_token(
    connector_id: str, tenant: str, org: str, ttl: str, config_path: Path | None
) -> None:
    """Mint a connector token for connector ID of the scope (sent as ``x-connector-token``):
    it may ingest only as that connector. Prints it alone on one line; an unknown connector
    exits 1."""
    from telha.tokens import load_token_key, mint_connector_token, parse_ttl

    scope = scope_of(tenant, org)
    try:
        cid = uuid.UUID(connector_id).bytes
    except ValueError:
        raise click.BadParameter("not a UUID", param_hint="ID") from None
    try:
        ttl_s = parse_ttl(ttl)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--ttl") from None
    cfg, base_dir = existing_store(config_path)
    found = run_on_store(cfg, base_dir, lambda s: s.connectors.get(scope, cid))
    if found is None:
        click.echo(f"telha: no such connector in {tenant}/{org}: {connector_id}", err=True)
        sys.exit(1)
    try:
        key = load_token_key(cfg.grpc.token_key, cfg.storage_path(base_dir).parent)
    except ValueError as exc:
        click.echo(f"telha: config error: grpc.token_key: {exc}", err=True)
        sys.exit(2)
    click.echo(mint_connector_token(key, scope, cid, ttl_s))


_TERMINAL = ("completed", "dead", "cancelled")


def _progress(run: RunOut) -> str:
    """One line of a run: state (``running`` while leased), its counts so far once its first
    page is in, its item jobs by state."""
    line = "running" if run.state == "leased" else run.state
    if run.listed is not None:
        line += (
            f"  listed {run.listed}  added {run.added}  changed {run.changed}"
            f"  unchanged {run.unchanged}  retired {run.retired}  failed {run.failed}"
        )
    if run.children:
        line += "  items " + " ".join(f"{k}={v}" for k, v in sorted(run.children.items()))
    return line


@click.command("sync")
@click.argument("connector_id", metavar="ID")
@click.option("--confirm-prune", is_flag=True,
              help="let this run retire more than the connector's prune fraction")  # fmt: skip
@click.option("--no-wait", is_flag=True, help="print the run id and return")
@_URL
@_KEY
def sync(connector_id: str, confirm_prune: bool, no_wait: bool, url: str, api_key: str) -> None:
    """Start a sync run of connector ID and show its progress until it and its item jobs
    end (on stderr: one line rewritten in place on a terminal, else one line per change;
    the last line on stdout). Exit 0 when it completed with a complete listing, 3 when it
    completed with a warning or an incomplete listing (nothing retired), 1 when it
    failed."""
    tty = sys.stderr.isatty()

    def show(line: str) -> None:
        if tty:  # one status line, rewritten: carriage return, the line, erase to its end
            click.echo(f"\r{line}\x1b[K", err=True, nl=False)
        else:
            click.echo(line, err=True)

    async def go(client: AsyncTelha) -> RunOut | str:
        started = await client.start_run(connector_id, confirm_prune=confirm_prune)
        if no_wait:
            return started.run_id
        shown = ""
        while True:
            # The newest run is ours until it ended (one run at a time per connector); only
            # then may a scheduled one come first. Listing more runs recounts their items.
            runs = await client.runs(connector_id, limit=1)
            if not runs or runs[0].run_id != started.run_id:
                runs = await client.runs(connector_id, limit=20)
            run = next(r for r in runs if r.run_id == started.run_id)
            line = _progress(run)
            settled = run.state in _TERMINAL and not ({"pending", "leased"} & set(run.children))
            if settled:
                if tty and shown:
                    click.echo("\r\x1b[K", err=True, nl=False)
                return run
            if line != shown:
                show(line)
                shown = line
            await anyio.sleep(0.5)

    done = _call(url, api_key, go)
    if isinstance(done, str):
        click.echo(done)
        return
    click.echo(_progress(done))
    if done.state != "completed":
        click.echo(f"telha: run {done.run_id} {done.state}: {done.failure_reason}", err=True)
        sys.exit(1)
    if done.warning or done.error or not done.complete:
        click.echo(f"telha: {done.warning or done.error or 'listing incomplete'}", err=True)
        sys.exit(3)
