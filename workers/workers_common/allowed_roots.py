"""Where a connector may read on the worker's machine (docs/connectors.md, "Allowed roots"):
the rule the server checks when a ``folder`` or ``slack-export`` connector is added and the
connector worker checks at every run, written once here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["PATH_SETTINGS", "inside"]

#: The setting naming a path on the worker's machine, by connector kind.
PATH_SETTINGS = {"folder": "root", "slack-export": "path"}


def inside(path: str, roots: Sequence[str]) -> bool:
    """True when ``path`` (resolved: links, ``..``) equals or lies under one of ``roots``
    (each resolved too; a sibling sharing a prefix, ``/srv/share-x`` against ``/srv/share``,
    is outside). Touches the filesystem (``os.path.realpath``), never raises."""
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False
