"""The ``telha`` command line (click): ``serve``, ``migrate``, ``check``, ``api-key
create``/``list``/``revoke``/``worker-token`` (:mod:`telha.cli.keys`), ``webhook``
(:mod:`telha.cli.webhooks`), ``gc`` (:mod:`telha.cli.gc`), and the client commands
``ingest``, ``job``, ``jobs``, ``cancel``, ``source``, ``sources``, ``retire`` and ``diff``
(:mod:`telha.cli.ingest`, :mod:`telha.cli.client`, :mod:`telha.cli.listings`), and
``search`` and ``mcp`` (:mod:`telha.cli.retrieval`), and ``scope`` (:mod:`telha.cli.scope`).

Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error (the message names
the dotted config key).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
from pathlib import Path

import anyio
import click

from telha.cli.config import CONFIG_OPTION, load_or_exit
from telha.config import ConfigError
from telha.domain.errors import StorageError
from telha.domain.model import Scope

__all__ = ["main"]

_CONFIG = CONFIG_OPTION


def _run_backend() -> dict[str, object]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


@click.group()
def main() -> None:
    """Telha: ingest documents into a graph with byte-exact provenance."""


@main.command()
@_CONFIG
@click.option("--log-level", default="info", show_default=True)
def serve(config_path: Path | None, log_level: str) -> None:
    """Run the service (REST front, store, workers) until SIGTERM/SIGINT."""
    from telha.env_names import warn_stray_env
    from telha.logs import configure_logging
    from telha.service.wiring import serve as run_service
    from workers_common.gc_tuning import limit_malloc_arenas, tune_gc

    cfg, base_dir = load_or_exit(config_path)
    configure_logging(log_level)
    warn_stray_env(os.environ)
    tune_gc()
    limit_malloc_arenas()
    try:
        anyio.run(run_service, cfg, base_dir, backend="asyncio", backend_options=_run_backend())
        # Stopped cleanly: a late signal must not turn exit 0 into a kill.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # Everything is committed and every held job released; a parse still running in a
        # worker thread (its job already back in the queue) must not hold the exit.
        logging.shutdown()
        os._exit(0)
    except BaseException as exc:
        config_error = _find(exc, ConfigError)
        if config_error is not None:
            click.echo(f"telha: config error: {config_error}", err=True)
            sys.exit(2)
        message = _startup_failure(exc)
        if message is None:
            raise
        click.echo(f"telha: {message}", err=True)
        sys.exit(1)


def _find(exc: BaseException, kind: type[ConfigError]) -> ConfigError | None:
    """``exc`` itself or the first ``kind`` inside (possibly nested) exception groups."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


def _startup_failure(exc: BaseException) -> str | None:
    """A one-line message for the failures an operator fixes outside the code (a busy port,
    an unopenable database, a crash loop), looked up through task-group exception groups."""
    from telha.service.supervisor import CrashLoop

    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _startup_failure(inner)
            if found is not None:
                return found
        return None
    if isinstance(exc, StorageError):
        return f"storage error: {exc.message}"
    if isinstance(exc, CrashLoop):
        return f"gave up: {exc}"
    if isinstance(exc, OSError):
        hint = " (set [server] addresses or TELHA_SERVER__REST_ADDR)"
        where = hint if exc.errno == errno.EADDRINUSE else ""
        return f"{exc.strerror or exc}{where}"
    return None


@main.command()
@_CONFIG
def migrate(config_path: Path | None) -> None:
    """Apply the storage engine's pending migrations, then exit (``serve`` applies them at
    start too; several replicas starting at once apply each migration once)."""
    from telha.storage import open_store

    cfg, base_dir = load_or_exit(config_path)

    async def run() -> None:
        async with open_store(cfg, base_dir, readers=1, pool_size=2):
            pass

    try:
        anyio.run(run, backend="asyncio")
    except StorageError as exc:
        click.echo(f"telha: storage error: {exc.message}", err=True)
        sys.exit(1)
    click.echo(f"telha: {cfg.storage.engine} schema is current")


@main.command()
@_CONFIG
@click.option("--page", default=1000, show_default=True, help="rows read per page")
def check(config_path: Path | None, page: int) -> None:
    """Check the store's consistency, read-only (safe beside a running ``telha serve``):
    provenance spans, the span reverse index, canonical text hashes, orphaned streams, job
    states. Prints a summary; exits 1 on any violation (or when the store cannot be read)."""
    from telha.check.runner import check_config, format_report
    from telha.storage import open_store

    cfg, base_dir = load_or_exit(config_path)
    location = f"{cfg.storage.engine} {open_store(cfg, base_dir, readonly=True).location}"
    try:
        report = anyio.run(lambda: check_config(cfg, base_dir, page=page), backend="asyncio")
    except StorageError as exc:
        click.echo(f"telha: storage error: {exc.message}", err=True)
        sys.exit(1)
    click.echo(format_report(report, location))
    sys.exit(1 if report.total else 0)


@main.group("api-key")
def api_key() -> None:
    """Manage credentials."""


@api_key.command("create")
@click.option("--tenant", required=True, help="tenant id of the key's scope")
@click.option("--org", required=True, help="organization id of the key's scope")
@click.option(
    "--principals", default=None, metavar="LIST",
    help="the principals the key acts for, comma-separated (user:alice,group:eng): it then"
    " sees only sources without an ACL or whose ACL names one of them",
)  # fmt: skip
@_CONFIG
def api_key_create(tenant: str, org: str, principals: str | None, config_path: Path | None) -> None:
    """Mint a REST API key for (tenant, org); prints the key alone on one line.

    Only its hash is stored; a running ``telha serve`` accepts it at once. The store must
    exist (the server's: ``--config``); none is created. With ``--principals`` the key
    acts for those principals (docs/rest-api.md, "Principals"); a request's
    ``x-telha-principals`` header may only narrow them.
    """
    from telha.auth import hash_key, mint_api_key
    from telha.cli.config import run_on_store
    from telha.cli.keys import existing_store, principals_option

    if not tenant.strip() or not org.strip():
        raise click.UsageError("--tenant and --org must not be empty")
    acts_for = principals_option(principals)
    cfg, base_dir = existing_store(config_path)
    key_id, key = mint_api_key()
    run_on_store(
        cfg, base_dir,
        lambda store: store.keys.add(Scope(tenant, org), key_id, hash_key(key), acts_for),
    )  # fmt: skip
    click.echo(key)


@api_key.command("worker-token")
@click.option("--tenant", default=None, help="tenant of the jobs the worker may take")
@click.option("--org", default=None, help="organization of the jobs the worker may take")
@click.option("--fleet", is_flag=True, help="a token for every scope's jobs")
@click.option("--ttl", default="30d", show_default=True, help="lifetime: 30d, 12h, 90m, 45s")
@_CONFIG
def worker_token(
    tenant: str | None, org: str | None, fleet: bool, ttl: str, config_path: Path | None
) -> None:
    """Mint a signed, expiring worker token (for TELHA_WORKER_TOKEN); prints it alone on one
    line. Keyed by ``grpc.token_key`` (or the key file generated in the data folder)."""
    from telha.tokens import load_token_key, mint_worker_token, parse_ttl

    if fleet == bool(tenant or org) or (not fleet and not (tenant and org)):
        raise click.UsageError("give --tenant and --org for a scoped token, or --fleet alone")
    try:
        ttl_s = parse_ttl(ttl)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--ttl") from None
    cfg, base_dir = load_or_exit(config_path)
    try:
        key = load_token_key(cfg.grpc.token_key, cfg.storage_path(base_dir).parent)
    except ValueError as exc:
        click.echo(f"telha: config error: grpc.token_key: {exc}", err=True)
        sys.exit(2)
    scope = None if fleet else Scope(str(tenant), str(org))
    click.echo(mint_worker_token(key, scope, ttl_s))


def _client_commands() -> None:
    from telha.cli.client import cancel, diff, job, retire, source
    from telha.cli.connectors import connector, sync
    from telha.cli.gc import gc
    from telha.cli.ingest import ingest
    from telha.cli.listings import jobs, sources
    from telha.cli.reproject import reproject
    from telha.cli.retrieval import mcp, search
    from telha.cli.scope import scope
    from telha.cli.webhooks import webhook

    commands: tuple[click.Command, ...] = (ingest, job, jobs, cancel, source, sources, retire)
    commands += (diff, webhook, gc, search, mcp)
    commands += (scope, reproject, connector, sync)
    for command in commands:
        main.add_command(command)
    from telha.cli.keys import keys_list, keys_revoke

    api_key.add_command(keys_list)
    api_key.add_command(keys_revoke)


_client_commands()
