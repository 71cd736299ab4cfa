"""``telha webhook add|list|remove|secret`` (docs/cli-and-client.md, "Webhooks"): a scope's
scope-wide webhook subscriptions and its signing secret, written straight to the store the
config names (a running ``telha serve`` uses them at once)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import click

from telha.cli_config import load_or_exit
from telha.config import Config
from telha.domain.errors import RequestError, StorageError
from telha.domain.ids import id_str, now_us
from telha.domain.model import TERMINAL_JOB_STATES, Scope
from telha.domain.webhooks import ALL_EVENTS, event_names, events_mask, validate_url
from telha.storage import StorageEngine, open_store

__all__ = ["webhook"]

T = TypeVar("T")

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


def _with_store(cfg: Config, base_dir: Path, op: Callable[[StorageEngine], Awaitable[T]]) -> T:
    """Run ``op`` on the opened store; a storage error exits 1 with its message."""

    async def run() -> T:
        async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
            return await op(store)

    try:
        return anyio.run(run, backend="asyncio")
    except StorageError as exc:
        click.echo(f"telha: storage error: {exc.message}", err=True)
        sys.exit(1)


@click.group("webhook")
def webhook() -> None:
    """Scope-wide webhooks and the scope's signing secret."""


@webhook.command("add")
@_TENANT
@_ORG
@click.option(
    "--events",
    default=",".join(TERMINAL_JOB_STATES),
    show_default=True,
    help="terminal states to notify, comma-separated",
)
@_CONFIG
@click.argument("url")
def webhook_add(tenant: str, org: str, events: str, config_path: Path | None, url: str) -> None:
    """POST every job of the scope to URL when it reaches one of EVENTS. The scope's first
    add makes its signing secret and prints it alone on stdout (shown once); the webhook's id
    goes to stderr."""
    scope = _scope(tenant, org)
    cfg, base_dir = load_or_exit(config_path)
    try:
        validate_url(url, cfg.webhooks.allowed_hosts, "URL")
        mask = events_mask([e.strip() for e in events.split(",") if e.strip()], "--events")
    except RequestError as exc:
        raise click.BadParameter(exc.message) from None
    webhook_id, secret = _with_store(
        cfg, base_dir, lambda s: s.add_webhook(scope, url, mask, now_us=now_us())
    )
    click.echo(f"webhook {id_str(webhook_id)} added", err=True)
    if secret is not None:
        click.echo(secret)


@webhook.command("list")
@_TENANT
@_ORG
@_CONFIG
def webhook_list(tenant: str, org: str, config_path: Path | None) -> None:
    """The scope's webhooks, one per line: id, events, URL."""
    scope = _scope(tenant, org)
    cfg, base_dir = load_or_exit(config_path)
    for hook in _with_store(cfg, base_dir, lambda s: s.list_webhooks(scope)):
        events = ",".join(event_names(hook.events)) if hook.events != ALL_EVENTS else "all"
        click.echo(f"{id_str(hook.webhook_id)}\t{events}\t{hook.url}")


@webhook.command("remove")
@_TENANT
@_ORG
@_CONFIG
@click.argument("webhook_id")
def webhook_remove(tenant: str, org: str, config_path: Path | None, webhook_id: str) -> None:
    """Remove one of the scope's webhooks (deliveries already due are still made); exit 1
    when the scope has no webhook of that id."""
    scope = _scope(tenant, org)
    try:
        raw = uuid.UUID(webhook_id).bytes
    except ValueError:
        raise click.BadParameter("not a webhook id (a UUID)", param_hint="WEBHOOK_ID") from None
    cfg, base_dir = load_or_exit(config_path)
    if not _with_store(cfg, base_dir, lambda s: s.remove_webhook(scope, raw)):
        click.echo(f"telha: no webhook {webhook_id} in this scope", err=True)
        sys.exit(1)


@webhook.command("secret")
@_TENANT
@_ORG
@_CONFIG
def webhook_secret(tenant: str, org: str, config_path: Path | None) -> None:
    """Make the scope's signing secret, or rotate it; prints the new one alone on stdout.
    Every delivery sent from now on is signed with it."""
    scope = _scope(tenant, org)
    cfg, base_dir = load_or_exit(config_path)
    click.echo(
        _with_store(cfg, base_dir, lambda s: s.rotate_webhook_secret(scope, now_us=now_us()))
    )
