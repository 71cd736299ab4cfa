"""The ``config.toml`` the ``telha`` commands that open the store themselves read (``serve``,
``migrate``, ``check``, ``api-key``, ``webhook``, ``scope``, ``gc``), their shared options,
and running one operation on that store."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import click

from telha.config import Config, ConfigError, load_config
from telha.domain.errors import StorageError
from telha.domain.model import Scope

if TYPE_CHECKING:  # the store's stack is imported when a command opens it, not by ``--help``
    from telha.storage import StorageEngine

__all__ = [
    "CONFIG_OPTION",
    "ORG_OPTION",
    "TENANT_OPTION",
    "load_or_exit",
    "run_on_store",
    "scope_of",
]

_T = TypeVar("_T")

#: ``--config``: the config.toml a command reads.
CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="config.toml (default: ./config.toml when present, else built-in defaults)",
)
#: ``--tenant`` and ``--org``: the scope a command acts on (:func:`scope_of`).
TENANT_OPTION = click.option("--tenant", required=True, help="tenant id of the scope")
ORG_OPTION = click.option("--org", required=True, help="organization id of the scope")


def scope_of(tenant: str, org: str) -> Scope:
    """The scope ``--tenant``/``--org`` name.

    :raises click.UsageError: either is blank (exit 2).
    """
    if not tenant.strip() or not org.strip():
        raise click.UsageError("--tenant and --org must not be empty")
    return Scope(tenant, org)


def run_on_store(cfg: Config, base_dir: Path, op: Callable[[StorageEngine], Awaitable[_T]]) -> _T:
    """``op(store)`` on the store ``cfg`` names, opened for it alone; a storage error prints
    ``telha: storage error: …`` and exits 1."""
    from telha.storage import open_store

    async def run() -> _T:
        async with open_store(cfg, base_dir, readers=1, pool_size=2) as store:
            return await op(store)

    try:
        return anyio.run(run, backend="asyncio")
    except StorageError as exc:
        click.echo(f"telha: storage error: {exc.message}", err=True)
        sys.exit(1)


def load_or_exit(config_path: Path | None) -> tuple[Config, Path]:
    """The config at ``config_path`` (default: ``./config.toml`` when present, else the
    built-in defaults) and its folder; a bad one prints ``telha: config error: …`` naming
    the dotted key and exits 2."""
    if config_path is None and Path("config.toml").is_file():
        config_path = Path("config.toml")
    try:
        return load_config(config_path)
    except ConfigError as exc:
        click.echo(f"telha: config error: {exc}", err=True)
        sys.exit(2)
