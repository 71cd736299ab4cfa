"""``telha webhook add|list|remove|secret`` (docs/cli-and-client.md, "Webhooks"): a scope's
scope-wide webhook subscriptions and its signing secret, written straight to the store the
config names (a running ``telha serve`` uses them at once)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import TypeVar

import click

from telha.cli.config import (
    CONFIG_OPTION,
    ORG_OPTION,
    TENANT_OPTION,
    load_or_exit,
    run_on_store,
    scope_of,
)
from telha.domain.errors import RequestError
from telha.domain.ids import id_str, now_us
from telha.domain.model import TERMINAL_JOB_STATES
from telha.domain.webhooks import (
    ALL_EVENTS,
    event_names,
    events_mask,
    validate_url,
)

__all__ = ["webhook"]

T = TypeVar("T")

_CONFIG, _TENANT, _ORG = CONFIG_OPTION, TENANT_OPTION, ORG_OPTION


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
    scope = scope_of(tenant, org)
    cfg, base_dir = load_or_exit(config_path)
    try:
        url = validate_url(url, cfg.webhooks.rules(), "URL")
        mask = events_mask([e.strip() for e in events.split(",") if e.strip()], "--events")
    except RequestError as exc:
        raise click.BadParameter(exc.message) from None
    webhook_id, secret = run_on_store(
        cfg, base_dir, lambda s: s.webhooks.add(scope, url, mask, now_us=now_us())
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
    scope = scope_of(tenant, org)
    cfg, base_dir = load_or_exit(config_path)
    for hook in run_on_store(cfg, base_dir, lambda s: s.webhooks.subscriptions(scope)):
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
    scope = scope_of(tenant, org)
    try:
        raw = uuid.UUID(webhook_id).bytes
    except ValueError:
        raise click.BadParameter("not a webhook id (a UUID)", param_hint="WEBHOOK_ID") from None
    cfg, base_dir = load_or_exit(config_path)
    if not run_on_store(cfg, base_dir, lambda s: s.webhooks.remove(scope, raw)):
        click.echo(f"telha: no webhook {webhook_id} in this scope", err=True)
        sys.exit(1)


@webhook.command("secret")
@_TENANT
@_ORG
@_CONFIG
def webhook_secret(tenant: str, org: str, config_path: Path | None) -> None:
    """Make the scope's signing secret, or rotate it; prints the new one alone on stdout.
    Every delivery sent from now on is signed with it."""
    scope = scope_of(tenant, org)
    cfg, base_dir = load_or_exit(config_path)
    click.echo(
        run_on_store(cfg, base_dir, lambda s: s.webhooks.rotate_secret(scope, now_us=now_us()))
    )
