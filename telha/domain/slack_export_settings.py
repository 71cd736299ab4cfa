"""The settings of the ``slack-export`` connector kind (docs/connectors.md, "The
slack-export kind"), checked when a connector is registered.

Pure; no I/O. Errors are :class:`~telha.domain.errors.RequestError` naming the field.
"""

from __future__ import annotations

from typing import Any

from telha.domain.errors import RequestError

__all__ = ["MAX_BYTES", "slack_export_settings"]

_KEYS = ("path", "channels", "maxEntryBytes", "maxTotalBytes")
#: The ceilings of ``maxEntryBytes`` and ``maxTotalBytes``: the connector worker's defaults
#: (a setting may only lower them; the worker refuses a run over them as well).
MAX_BYTES = {"maxEntryBytes": 256 << 20, "maxTotalBytes": 16 << 30}


def slack_export_settings(settings: dict[str, Any]) -> None:
    """``path`` (an absolute path to the export zip, required), ``channels`` (a list of
    channel names; none: all), ``maxEntryBytes`` and ``maxTotalBytes`` (positive integers:
    the largest uncompressed member and export, in bytes; each at most its
    :data:`MAX_BYTES` ceiling, the worker's default: settings may only lower it).

    :raises RequestError: a missing or relative path, a bad list, a limit not positive or
        over its ceiling, an unknown key.
    """
    path = settings.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise RequestError("settings.path: an absolute path to the export zip is required")
    if "\x00" in path:
        raise RequestError("settings.path: must not contain NUL")
    channels = settings.get("channels", [])
    if not isinstance(channels, list) or not all(isinstance(c, str) and c for c in channels):
        raise RequestError("settings.channels: a list of channel names")
    for key, ceiling in MAX_BYTES.items():
        value = settings.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 1 <= value <= ceiling):  # fmt: skip
            raise RequestError(f"settings.{key}: a positive number of bytes, at most {ceiling}")
    unknown = sorted(set(settings) - set(_KEYS))
    if unknown:
        known = ", ".join(_KEYS)
        raise RequestError(
            f"settings: unknown key(s) {', '.join(unknown)}; slack-export accepts {known}"
        )
