"""``telha connector add|list|remove|token`` (docs/connectors.md, "CLI"): a scope's
connectors over REST (``add``, ``list``, ``remove``), and a connector token minted from the
store's token key (``token``, like ``telha api-key worker-token``)."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from telha.cli_client import _KEY, _URL, _call
from telha.cli_config import CONFIG_OPTION, ORG_OPTION, TENANT_OPTION, run_on_store, scope_of
from telha.cli_keys import existing_store
from telha.cli_listings import _print
from telha.grpc.tokens import load_token_key, mint_connector_token, parse_ttl

__all__ = ["connector"]


@click.group("connector")
def connector() -> None:
    """Connectors: register, list, remove, mint a connector token."""


def _settings(raw: str, root: str | None, include: tuple[str, ...], exclude: tuple[str, ...]) -> Any:
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
    _print(
        ("id", "kind", "every", "created", "settings"),
        [
            [c.connector_id, c.kind, _every(c.every),
             datetime.fromtimestamp(c.created_at / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
             json.dumps(c.settings, sort_keys=True)]
            for c in rows
        ],  # fmt: skip
        [False] * len(rows),
    )


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
    found = run_on_store(cfg, base_dir, lambda s: s.get_connector(scope, cid))
    if found is None:
        click.echo(f"telha: no such connector in {tenant}/{org}: {connector_id}", err=True)
        sys.exit(1)
    try:
        key = load_token_key(cfg.grpc.token_key, cfg.storage_path(base_dir).parent)
    except ValueError as exc:
        click.echo(f"telha: config error: grpc.token_key: {exc}", err=True)
        sys.exit(2)
    click.echo(mint_connector_token(key, scope, cid, ttl_s))
