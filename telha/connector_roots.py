"""Where a ``folder`` or ``slack-export`` connector may read (docs/connectors.md, "Allowed
roots"): its ``settings.root`` / ``settings.path`` must lie inside one of ``[connectors]
allowed_roots`` once symbolic links and ``..`` are resolved (``os.path.realpath``). The
connector worker makes the same check at every run (``connectors.roots``); this one refuses
a connector when it is added.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from telha.domain.errors import RequestError

__all__ = ["PATH_SETTINGS", "check_roots", "inside"]

#: The setting naming a path on the worker's machine, by connector kind.
PATH_SETTINGS = {"folder": "root", "slack-export": "path"}


def inside(path: str, roots: Sequence[str]) -> bool:
    """True when ``path`` (resolved: links, ``..``) equals or lies under one of ``roots``
    (each resolved too). Touches the filesystem (``realpath``), never raises."""
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def check_roots(kind: str, settings: dict[str, Any], roots: Sequence[str]) -> None:
    """Refuse a connector whose path setting lies outside ``roots`` (other kinds pass).

    :raises RequestError: ``settings.root`` / ``settings.path`` outside every allowed root,
        or no root allowed at all (the message names ``[connectors] allowed_roots``).
    """
    key = PATH_SETTINGS.get(kind)
    if key is None:
        return
    path = str(settings[key])
    if not roots:
        raise RequestError(
            f"settings.{key}: {kind} connectors are off on this server:"
            " [connectors] allowed_roots is empty"
        )
    if not inside(path, roots):
        raise RequestError(
            f"settings.{key}: {path} is outside [connectors] allowed_roots"
            " (after resolving symbolic links and ..)"
        )
