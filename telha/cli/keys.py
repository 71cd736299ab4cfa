"""``telha api-key list`` and ``telha api-key revoke`` (docs/cli-and-client.md), and the
rule every ``api-key`` command that opens the store keeps: it opens an existing store only.

Run from another folder, ``telha api-key create`` used to make a new, empty database there
and print a key the running server did not know; now a missing SQLite file is named
(``telha: no database at …``), with the config that pointed there, and the command exits
2 having written nothing.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import click

from telha.cli.config import load_or_exit, run_on_store
from telha.cli.listings import _print
from telha.config import Config
from telha.domain.acl import parse_principals
from telha.domain.errors import RequestError
from telha.domain.model import Scope

__all__ = ["existing_store", "keys_list", "keys_revoke", "principals_option"]

_T = TypeVar("_T")

_CONFIG = click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="the server's config.toml (default: ./config.toml when present, else built-in defaults)",
)  # fmt: skip


def existing_store(config_path: Path | None) -> tuple[Config, Path]:
    """The config (as :func:`~telha.cli.config.load_or_exit` finds it) of a store that
    exists: with SQLite, a missing database file prints which file was looked for, from
    which config, and that ``--config`` picks the server's, then exits 2."""
    cfg, base_dir = load_or_exit(config_path)
    if cfg.storage.engine == "sqlite":
        db = cfg.storage_path(base_dir).resolve()
        if not db.is_file():
            used = config_path or (Path("config.toml") if Path("config.toml").is_file() else None)
            source = (
                f"config {used.resolve()}" if used else "built-in defaults, no config.toml here"
            )
            click.echo(
                f"telha: no database at {db} ({source}); pick the running server's config"
                " with --config (key commands never create a store)",
                err=True,
            )
            sys.exit(2)
    return cfg, base_dir


def principals_option(value: str | None) -> tuple[str, ...] | None:
    """``--principals`` as the key stores them (:func:`telha.domain.acl.parse_principals`);
    ``None`` when not given.

    :raises click.BadParameter: a malformed list.
    """
    if value is None:
        return None
    try:
        return parse_principals(value, "--principals")
    except RequestError as exc:
        raise click.BadParameter(exc.message, param_hint="--principals") from None


def _when(at_us: int | None) -> str:
    """A µs time as UTC ISO 8601 to the second; ``-`` for none."""
    if at_us is None:
        return "-"
    return datetime.fromtimestamp(at_us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@click.command("list")
@click.option("--tenant", default=None, help="only this tenant's keys (with --org)")
@click.option("--org", default=None, help="only this organization's keys (with --tenant)")
@click.option("--revoked", is_flag=True, help="revoked keys too, with a revoked column")
@_CONFIG
def keys_list(tenant: str | None, org: str | None, revoked: bool, config_path: Path | None) -> None:
    """List the store's API keys, oldest first, one line each: id, scope (tenant/org),
    created, last used (UTC; to the minute), the principals it acts for (``-``: none) —
    never the key. A table on a terminal, TSV
    with a header line when piped."""
    if (tenant is None) != (org is None):
        raise click.UsageError("give --tenant and --org together, or neither")
    scope = Scope(tenant, org) if tenant is not None and org is not None else None
    cfg, base_dir = existing_store(config_path)
    keys = run_on_store(cfg, base_dir, lambda s: s.keys.listed(scope, revoked=revoked))
    columns: tuple[str, ...] = ("id", "scope", "created", "last used", "principals")
    rows = [
        [k.key_id, f"{k.scope.tenant_id}/{k.scope.organization_id}", _when(k.created_at),
         _when(k.last_used_at), ",".join(k.principals) if k.principals is not None else "-"]
        for k in keys
    ]  # fmt: skip
    if revoked:
        columns += ("revoked",)
        for row, k in zip(rows, keys, strict=True):
            row.append(_when(k.revoked_at) if k.revoked_at is not None else "")
    _print(columns, rows, [k.revoked_at is not None for k in keys])


@click.command("revoke")
@click.argument("key_id", metavar="ID")
@_CONFIG
def keys_revoke(key_id: str, config_path: Path | None) -> None:
    """Revoke an API key by its id (``telha api-key list``): a running server refuses it
    within 10 s (the time it remembers a key). Prints ``ID  revoked  TIME``; revoking
    again prints the first revoke; an unknown id exits 1."""
    cfg, base_dir = existing_store(config_path)
    at = run_on_store(cfg, base_dir, lambda s: s.keys.revoke(key_id))
    if at is None:
        click.echo(f"telha: no such key: {key_id}", err=True)
        sys.exit(1)
    click.echo(f"{key_id}  revoked  {_when(at)}")
