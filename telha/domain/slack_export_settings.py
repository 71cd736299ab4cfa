"""The settings of the ``slack-export`` connector kind (docs/connectors.md, "The
slack-export kind"), checked when a connector is registered.

Pure; no I/O. Errors are :class:`~telha.domain.errors.RequestError` naming the field.
"""

from __future__ import annotations

from typing import Any

from telha.domain.errors import RequestError

__all__ = ["slack_export_settings"]

_KEYS = ("path", "channels", "maxEntryBytes", "maxTotalBytes")


def slack_export_settings(settings: dict[str, Any]) -> None:
    """``path`` (an absolute path to the export zip, required), ``channels`` (a list of
    channel names; none: all), ``maxEntryBytes`` and ``maxTotalBytes`` (positive integers:
    the largest uncompressed member and export, in bytes).

    :raises RequestError: a missing or relative path, a bad list or limit, an unknown key.
    """
    path = settings.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise RequestError("settings.path: an absolute path to the export zip is required")
    if "\x00" in path:
        raise RequestError("settings.path: must not contain NUL")
    channels = settings.get("channels", [])
    if not isinstance(channels, list) or not all(isinstance(c, str) and c for c in channels):
        raise RequestError("settings.channels: a list of channel names")
    for key in ("maxEntryBytes", "maxTotalBytes"):
        value = settings.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):  # fmt: skip
            raise RequestError(f"settings.{key}: a positive number of bytes")
    unknown = sorted(set(settings) - set(_KEYS))
    if unknown:
        known = ", ".join(_KEYS)
        raise RequestError(
            f"settings: unknown key(s) {', '.join(unknown)}; slack-export accepts {known}"
        )
