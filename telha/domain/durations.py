"""Durations as people write them (``30d``, ``12h``, ``90m``, ``45s`` or plain seconds): a
worker or connector token's lifetime, a connector's schedule (docs/connectors.md)."""

from __future__ import annotations

import re

__all__ = ["parse_duration"]

_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"45s"`` or plain seconds → seconds.

    :raises ValueError: anything else, or zero.
    """
    m = _DURATION.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"expected a duration like 30d, 12h, 90m or 45s, got {text!r}")
    return int(m.group(1)) * _UNIT_S[m.group(2)]
