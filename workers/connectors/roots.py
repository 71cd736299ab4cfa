"""The connector worker's own check of where a ``folder`` or ``slack-export`` connector may
read (docs/connectors.md, "Allowed roots"), made at every run: ``settings.root`` /
``settings.path`` must lie inside one of the directories of
``TELHA_CONNECTORS__ALLOWED_ROOTS`` (a JSON list of absolute paths; ``telha serve`` exports
its ``[connectors] allowed_roots`` under that name, a remote worker is given it) once
symbolic links and ``..`` are resolved. Unset or empty: no such connector runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from workers_common import CorruptInput
from workers_common.allowed_roots import PATH_SETTINGS, inside

__all__ = ["ENV_NAME", "allowed_roots", "check_run"]

#: The environment variable holding the allowed roots (a JSON list).
ENV_NAME = "TELHA_CONNECTORS__ALLOWED_ROOTS"


def allowed_roots(environ: Mapping[str, str] | None = None) -> list[str]:
    """The allowed roots of ``environ`` (default ``os.environ``); ``[]`` when unset.

    :raises CorruptInput: the value is not a JSON list of absolute paths.
    """
    raw = (os.environ if environ is None else environ).get(ENV_NAME, "").strip()
    if not raw:
        return []
    try:
        roots = json.loads(raw)
    except ValueError:
        roots = None
    if not isinstance(roots, list) or not all(
        isinstance(r, str) and r.startswith("/") for r in roots
    ):
        raise CorruptInput(f"{ENV_NAME}: a JSON list of absolute paths is required")
    return roots


def check_run(
    kind: str, settings: dict[str, Any], environ: Mapping[str, str] | None = None
) -> None:
    """Refuse a run whose path setting lies outside the allowed roots (other kinds pass).

    :raises CorruptInput: the path is outside every allowed root, none is allowed, or the
        setting is not a string (the run fails ``corrupt_input``; nothing is retired).
    """
    key = PATH_SETTINGS.get(kind)
    if key is None:
        return
    path = settings.get(key)
    if not isinstance(path, str) or not path.startswith("/") or "\x00" in path:
        raise CorruptInput(f"settings.{key}: an absolute path is required")
    roots = allowed_roots(environ)
    if not roots:
        raise CorruptInput(
            f"settings.{key}: {kind} connectors are off on this worker:"
            " [connectors] allowed_roots is empty"
        )
    if not inside(path, roots):
        raise CorruptInput(f"settings.{key}: {path} is outside [connectors] allowed_roots")
