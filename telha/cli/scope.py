"""``telha scope set`` and ``telha scope show`` (docs/cli-and-client.md, docs/operations.md
"Quotas and rate limits"): a scope's own limits, over the ``[quotas]`` defaults, in the
store the config names. A running ``telha serve`` applies a change within
:data:`telha.rest.quotas.LIMITS_TTL_S` seconds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from telha.cli.config import (
    CONFIG_OPTION,
    ORG_OPTION,
    TENANT_OPTION,
    load_or_exit,
    run_on_store,
    scope_of,
)
from telha.domain.quotas import LIMIT_KEYS, default_limits, parse_limit

if TYPE_CHECKING:
    from telha.storage import StorageEngine

__all__ = ["scope"]

_CONFIG, _TENANT, _ORG = CONFIG_OPTION, TENANT_OPTION, ORG_OPTION


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
    """Set KEY to VALUE for the scope: a number >= 0 (0: unlimited, or for the slot shares
    max_concurrent_ingests and max_event_streams every slot; an integer for all but
    requests_per_second), or 'default' to go back to the [quotas] default."""
    target = scope_of(tenant, org)
    try:
        parsed = parse_limit(key, value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="VALUE") from None
    cfg, base_dir = load_or_exit(config_path)
    run_on_store(cfg, base_dir, lambda store: store.quotas.set_limit(target, key, parsed))
    shown = "the [quotas] default" if parsed is None else value
    click.echo(f"telha scope: {key} of ({tenant}, {org}) is now {shown}")


@scope.command("show")
@_TENANT
@_ORG
@_CONFIG
def scope_show(tenant: str, org: str, config_path: Path | None) -> None:
    """Print the scope's limits (one ``key<TAB>value<TAB>origin`` line each; 0: unlimited)
    and its usage (pending jobs, stored bytes)."""
    target = scope_of(tenant, org)
    cfg, base_dir = load_or_exit(config_path)

    async def read(store: StorageEngine) -> tuple[dict[str, float], int, int]:
        own = await store.quotas.limits(target)
        return own, await store.quotas.pending_jobs(target), await store.quotas.stored_bytes(target)

    own, pending, stored = run_on_store(cfg, base_dir, read)
    defaults = default_limits(
        cfg.quotas,
        ingest_slots=cfg.ingest.max_concurrent,
        event_streams=cfg.server.max_event_streams,
    )
    limits = defaults.with_overrides(own)
    for key in LIMIT_KEYS:
        click.echo(f"{key}\t{getattr(limits, key):g}\t{'scope' if key in own else 'default'}")
    click.echo(f"pending_jobs\t{pending}")
    click.echo(f"stored_bytes\t{stored}")
