"""The ``config.toml`` the ``telha`` commands that open the store themselves read (``serve``,
``migrate``, ``check``, ``api-key``, ``webhook``, ``gc``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from telha.config import Config, ConfigError, load_config

__all__ = ["load_or_exit"]


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
