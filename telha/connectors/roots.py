"""Where a ``folder`` or ``slack-export`` connector may read (docs/connectors.md, "Allowed
roots"): its ``settings.root`` / ``settings.path`` must lie inside one of ``[connectors]
allowed_roots`` once symbolic links and ``..`` are resolved (``os.path.realpath``). The
connector worker makes the same check at every run (``connectors.roots``); this one refuses
a connector when it is added.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telha.domain.errors import RequestError
from workers_common.allowed_roots import PATH_SETTINGS, inside

__all__ = ["check_roots"]


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
