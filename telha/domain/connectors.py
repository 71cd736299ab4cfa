"""Connectors (docs/connectors.md): what a registered connector is, the settings each kind
accepts, the source id of a connector-synced item, and an item's ACL as stored.

Pure; no I/O. Errors are :class:`~telha.domain.errors.RequestError` (400 INVALID_REQUEST)
naming the field.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

import xxhash

from telha.domain.connector_imap import imap_settings
from telha.domain.durations import parse_duration
from telha.domain.errors import RequestError
from telha.domain.slack_export_settings import slack_export_settings

__all__ = [
    "CONNECTOR_KINDS",
    "DEFAULT_PRUNE_MAX_FRACTION",
    "MAX_EXTERNAL_ID_BYTES",
    "ConnectorItem",
    "ConnectorRecord",
    "check_acl",
    "check_connector",
    "check_external_id",
    "connector_source_id",
]

#: The share of a connector's live sources one run may retire before it stops and asks
#: for ``--confirm-prune`` (docs/connectors.md, "Deletions").
DEFAULT_PRUNE_MAX_FRACTION = 0.2

#: Longest ``externalId``, in UTF-8 bytes (a path or a remote id fits many times over).
MAX_EXTERNAL_ID_BYTES = 4096

#: Shortest schedule: a connector may not be asked to run more often than this (seconds).
MIN_EVERY_S = 60


def _folder_settings(settings: dict[str, Any]) -> None:
    """``folder``: ``root`` (an absolute path, required), ``include``/``exclude`` (lists of
    glob patterns matched against the path relative to the root)."""
    root = settings.get("root")
    if not isinstance(root, str) or not root.startswith("/"):
        raise RequestError("settings.root: an absolute path is required")
    if "\x00" in root:
        raise RequestError("settings.root: must not contain NUL")
    for key in ("include", "exclude"):
        value = settings.get(key, [])
        if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
            raise RequestError(f"settings.{key}: a list of non-empty glob patterns")
    unknown = sorted(set(settings) - {"root", "include", "exclude"})
    if unknown:
        raise RequestError(
            f"settings: unknown key(s) {', '.join(unknown)}; folder accepts root, include, exclude"
        )


#: Every connector kind and the check of its settings (docs/connectors.md, "Kinds").
CONNECTOR_KINDS = {
    "folder": _folder_settings,
    "imap": imap_settings,
    "slack-export": slack_export_settings,
}


@dataclass(frozen=True, slots=True)
class ConnectorRecord:
    """A registered connector: ``settings`` its JSON object; ``every_s`` its schedule in
    seconds (``None``: runs only when started); times in µs."""

    connector_id: bytes
    kind: str
    settings: dict[str, Any]
    every_s: int | None
    prune_max_fraction: float
    created_at: int
    removed_at: int | None = None


@dataclass(frozen=True, slots=True)
class ConnectorItem:
    """An item a connector created a source for: ``marker`` its change marker as last
    ingested (an etag, or modified time and size), ``acl`` its principals (``None``: no
    ACL), ``retired_at`` (µs) when the connector retired it."""

    connector_id: bytes
    external_id: str
    source_id: bytes
    name: str
    marker: str | None = None
    modified_us: int | None = None
    size: int | None = None
    acl: list[str] | None = None
    updated_at: int = 0
    retired_at: int | None = None


def connector_source_id(connector_id: str, tenant: str, external_id: str) -> uuid.UUID:
    """The source id of a connector-synced item: ``UUID(int=xxh3_128(b"conn:" + connector
    + b"\\0" + tenant + b"\\0" + external_id))`` (docs/architecture.md, "Identity"): a
    renamed or moved item keeps its source, and no name-derived id (``src:`` prefix) can
    equal it."""
    key = b"\0".join(s.encode("utf-8") for s in (connector_id, tenant, external_id))
    return uuid.UUID(int=xxhash.xxh3_128_intdigest(b"conn:" + key))


def check_external_id(value: Any) -> str:
    """A request's ``externalId``: a non-empty string of at most
    :data:`MAX_EXTERNAL_ID_BYTES` UTF-8 bytes, no NUL.

    :raises RequestError: anything else.
    """
    if not isinstance(value, str) or not value:
        raise RequestError("externalId: a non-empty string is required")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise RequestError("externalId: holds a lone surrogate and cannot be UTF-8") from None
    if size > MAX_EXTERNAL_ID_BYTES or "\x00" in value:
        raise RequestError(f"externalId: at most {MAX_EXTERNAL_ID_BYTES} UTF-8 bytes, no NUL")
    return value


def check_acl(value: Any) -> list[str] | None:
    """A request's ``acl``: ``null`` (no ACL) or a list of principal strings such as
    ``user:alice`` or ``group:staff``, sorted and without repeats as stored.

    :raises RequestError: not a list of non-empty strings, or over 1,000 principals.
    """
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise RequestError("acl: a list of principal strings (user:…, group:…) or null")
    if len(value) > 1000:
        raise RequestError("acl: at most 1000 principals")
    return sorted(set(value))


def check_connector(body: dict[str, Any]) -> tuple[str, dict[str, Any], int | None, float]:
    """A ``POST /v1/connectors`` body: ``kind``, ``settings``, ``every`` (seconds, or a
    duration such as ``15m``; optional) and ``pruneMaxFraction`` (optional, 0 < f ≤ 1) →
    ``(kind, settings, every_s, prune_max_fraction)``.

    :raises RequestError: an unknown field or kind, settings the kind refuses, a schedule
        under :data:`MIN_EVERY_S` seconds, a fraction outside (0, 1].
    """
    unknown = sorted(set(body) - {"kind", "settings", "every", "pruneMaxFraction"})
    if unknown:
        raise RequestError(f"unknown field(s): {', '.join(unknown)}")
    kind = body.get("kind")
    if not isinstance(kind, str) or kind not in CONNECTOR_KINDS:
        raise RequestError(
            f"kind: unknown connector kind {kind!r}; known kinds: {', '.join(CONNECTOR_KINDS)}"
        )
    settings = body.get("settings", {})
    if not isinstance(settings, dict):
        raise RequestError("settings: a JSON object is required")
    CONNECTOR_KINDS[kind](settings)
    every = body.get("every")
    every_s: int | None = None
    if every is not None:
        try:
            every_s = parse_duration(every) if isinstance(every, str) else int(every)
        except (ValueError, TypeError):
            raise RequestError("every: seconds or a duration such as 15m, 1h, 1d") from None
        if isinstance(every, bool) or every_s < MIN_EVERY_S:
            raise RequestError(f"every: at least {MIN_EVERY_S} seconds")
    fraction = body.get("pruneMaxFraction", DEFAULT_PRUNE_MAX_FRACTION)
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not math.isfinite(fraction)
        or not 0 < fraction <= 1
    ):
        raise RequestError("pruneMaxFraction: a number in (0, 1]")
    return kind, settings, every_s, float(fraction)


def settings_json(settings: dict[str, Any]) -> str:
    """The stored form of a connector's settings (canonical JSON)."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
