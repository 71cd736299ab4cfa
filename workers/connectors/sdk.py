"""The connector SDK (docs/connectors.md, "The SDK"): what a connector kind implements, and
the driver that turns one listing into a run's report.

A connector kind is a :class:`Connector`: ``list(checkpoint)`` yields :class:`RemoteItem`
(an item as the source describes it now, with its change marker) and :class:`Removed` (an
item the source says is gone — Microsoft Graph's ``@removed``), ``read(item)`` returns an
item's bytes, ``next_checkpoint()`` the cursor or delta token to start from next time, and
``full_listing(checkpoint)`` whether this listing enumerates everything (a folder walk; a
delta API's first call without a token) or only changes (a delta call with a token).

The driver (:func:`run_listing`) reads an item's bytes only when the item is new, or its
change marker differs from the one last ingested, or it has none; it never decides what to
retire — core does, from the report, by its deletion rules. A listing that cannot finish
raises :class:`ListingIncomplete`; the report then says ``complete: false`` and nothing is
retired. An item that cannot be read raises :class:`ItemUnreadable` (or ``OSError``): it is
a failed item, never retired for it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

__all__ = [
    "Connector",
    "ItemUnreadable",
    "ListingIncomplete",
    "RemoteItem",
    "Removed",
    "format_for",
    "run_listing",
]


class ListingIncomplete(Exception):
    """The listing stopped before its end (a folder it could not list, a page that failed,
    a timeout): the run retires nothing."""


class ItemUnreadable(Exception):
    """One item's bytes could not be read: a failed item of the run."""


@dataclass(frozen=True, slots=True)
class RemoteItem:
    """An item as the source lists it. ``external_id``: stable in the source (a path, a
    drive item id, UIDVALIDITY/UID); ``marker``: what changes when the content does (an
    etag, ``mtime:size``), ``None`` when the source gives none (then the bytes are always
    read); ``format``: Telha's format, ``None`` to take it from the name's extension
    (:func:`format_for`; an item of no known format is skipped); ``acl``: principals
    (``user:…``, ``group:…``), ``None`` for none; ``ref``: anything ``read`` needs."""

    external_id: str
    name: str
    marker: str | None
    modified_us: int | None = None
    size: int | None = None
    acl: list[str] | None = None
    format: str | None = None
    ref: Any = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Removed:
    """An item the source reports deleted (a delta's ``@removed``)."""

    external_id: str


class Connector(Protocol):
    """What a connector kind implements (see the module docstring)."""

    def full_listing(self, checkpoint: str | None) -> bool:
        """Whether ``list(checkpoint)`` enumerates every item (then what it does not list is
        gone) rather than only the changes since ``checkpoint``."""
        ...

    def list(self, checkpoint: str | None) -> Iterator[RemoteItem | Removed]:
        """The items (and deletions) since ``checkpoint`` (``None``: from the start).

        :raises ListingIncomplete: the listing could not finish.
        """
        ...

    def read(self, item: RemoteItem) -> bytes:
        """An item's bytes.

        :raises ItemUnreadable: (or ``OSError``) they cannot be read now.
        """
        ...

    def next_checkpoint(self) -> str | None:
        """After a finished listing: where the next run starts (``None``: from the start)."""
        ...


_FORMATS = {
    ".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown",
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".html": "html", ".htm": "html",
    ".csv": "csv", ".tsv": "tsv", ".xlsx": "xlsx", ".eml": "eml", ".msg": "msg",
    ".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".tif": "tiff", ".tiff": "tiff",
    ".bmp": "bmp", ".webp": "webp",
}  # fmt: skip


def format_for(name: str) -> str | None:
    """Telha's format for a file name by its extension (case-insensitive), ``None`` for
    none known (``.json`` included: a JSON source is ingested by request, not by sync)."""
    return _FORMATS.get(PurePosixPath(name).suffix.lower())


def run_listing(
    connector: Connector, known: Mapping[str, str | None], checkpoint: str | None
) -> dict[str, Any]:
    """One listing of ``connector`` as a run's report (docs/connectors.md, "Sync runs"):
    ``known`` maps the external ids core holds live to their last markers."""
    full = connector.full_listing(checkpoint)
    seen: list[str] = []
    removed: list[str] = []
    items: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    unchanged = 0
    complete, error, next_checkpoint = True, None, None
    try:
        for entry in connector.list(checkpoint):
            if isinstance(entry, Removed):
                removed.append(entry.external_id)
                continue
            fmt = entry.format or format_for(entry.name)
            if fmt is None:
                continue
            seen.append(entry.external_id)
            if entry.marker is not None and known.get(entry.external_id, "\0") == entry.marker:
                unchanged += 1
                continue
            try:
                raw = connector.read(entry)
            except (ItemUnreadable, OSError) as exc:
                failed.append({"externalId": entry.external_id, "reason": str(exc)})
                continue
            items.append({
                "externalId": entry.external_id, "name": entry.name, "format": fmt,
                "contentB64": base64.b64encode(raw).decode(), "marker": entry.marker,
                "modifiedUs": entry.modified_us, "size": len(raw), "acl": entry.acl,
            })  # fmt: skip
        next_checkpoint = connector.next_checkpoint()
    except ListingIncomplete as exc:
        complete, error = False, str(exc)
    return {
        "complete": complete, "fullListing": full, "seen": seen if full else [],
        "removed": removed, "items": items, "failed": failed, "unchanged": unchanged,
        "checkpoint": next_checkpoint, "error": error,
    }  # fmt: skip
