"""``telha scope set`` and ``telha scope show`` (docs/cli-and-client.md, docs/operations.md
"Quotas and rate limits"): a scope's own limits, over the ``[quotas]`` defaults, in the
store the config names. A running ``telha serve`` applies a change within
:data:`telha.rest.quotas.LIMITS_TTL_S` seconds."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import click

from telha.cli_config import load_or_exit
from telha.domain.errors import StorageError
from telha.domain.model import Scope
from telha.domain.quotas import LIMIT_KEYS, Limits, parse_limit
from telha.storage import open_store

__all__ = ["scope"]

_CONFIG = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="config.toml (default: ./config.toml when present, else built-in defaults)",
)
_TENANT = click.option("--tenant", required=True, help="tenant id of the scope")
_ORG = click.option("--org", required=True, help="organization id of the scope")


def _scope(tenant: str, org: str) -> Scope:
    if not tenant.strip() or not org.strip():
        raise click.UsageError("--tenant and --org must not be empty")
    return Scope(tenant, org)


@click.group("scope")
def scope() -> None:
    """A scope's quotas and rate limit."""


@scope.command("set")
@_TENANT
@_ORG
@click.argument("key", type=click.Choice(LIMIT_KEYS))
@click.argument("value")
@_CONFIG
def scope_set(tenant: str, org: str, key: str, value: str, config_path: Path | None) -> None:
    """Set KEY to VALUE for the scope: a number >= 0 (0: unlimited; an integer for all but
    requests_per_second), or 'default' to go back to the [quotas] default."""
    target = _scope(tenant, org)
    try:
        parsed = parse_limit(key, value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="VALUE") from None
    cfg, base_dir = load_or_exit(config_path)

    async def run() -> None:
        async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
            await store.set_scope_limit(target, key, parsed)

    try:
        anyio.run(run, backend="asyncio")
    except StorageError as exc:
        click.echo(f"telha: storage error: {exc.message}", err=True)
        sys.exit(1)
    shown = "the [quotas] default" if parsed is None else value
    click.echo(f"telha scope: {key} of ({tenant}, {org}) is now {shown}")


@scope.command("show")
@_TENANT
@_ORG
@_CONFIG
def scope_show(tenant: str, org: str, config_path: Path | None) -> None:
    """Print the scope's limits (one ``key<TAB>value<TAB>origin`` line each; 0: unlimited)
    and its usage (pending jobs, stored bytes)."""
    target = _scope(tenant, org)
    cfg, base_dir = load_or_exit(config_path)

    async def run() -> tuple[dict[str, float], int, int]:
        async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
            own = await store.scope_limits(target)
            return own, await store.pending_jobs(target), await store.stored_bytes(target)

    try:
        own, pending, stored = anyio.run(run, backend="asyncio")
    except StorageError as exc:
        click.echo(f"telha: storage error: {exc.message}", err=True)
        sys.exit(1)
    q = cfg.quotas
    defaults = Limits(
        max_pending_jobs=q.max_pending_jobs,
        max_stored_bytes=q.max_stored_bytes,
        requests_per_second=q.requests_per_second,
        burst=q.burst,
    )
    limits = defaults.with_overrides(own)
    for key in LIMIT_KEYS:
        click.echo(f"{key}\t{getattr(limits, key):g}\t{'scope' if key in own else 'default'}")
    click.echo(f"pending_jobs\t{pending}")
    click.echo(f"stored_bytes\t{stored}")
