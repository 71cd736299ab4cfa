"""The connector SDK (docs/connectors.md, "The SDK"): what a connector kind implements, and
the driver that turns one listing into a run's pages.

A connector kind is a :class:`Connector`, an *incremental listing*: ``list(checkpoint)``
takes the cursor or delta token of the last complete run (``None``: start from scratch)
and yields :class:`RemoteItem` (an item as the source describes it now, new or changed,
with its change marker) and :class:`Removed` (an item the source says is gone — Microsoft
Graph's ``@removed``); ``read(item)`` returns an item's bytes; after the listing,
``next_checkpoint()`` gives the token to start from next time and ``full_listing(checkpoint)``
says whether the listing enumerated everything (a folder walk; a delta API's first call,
or one that had to start over) — then what it did not list is gone — or only the changes
(a delta call with a token) — then only what it named :class:`Removed` is gone.

The driver (:func:`run_pages`) sends the listing to core page by page; core compares each
item's marker with the one last ingested and answers which items to read (new, changed,
no marker, or last ingest failed), so an unchanged item's bytes are never read. It never
decides what to retire — core does, at the end, by its deletion rules. A listing that
cannot finish raises :class:`ListingIncomplete`; the last page then says ``complete:
false`` and nothing is retired. An item that cannot be read raises :class:`ItemUnreadable`
(or ``OSError``): it is a failed item, never retired for it.

The items core asks for are read after the listing moved on, the last page's after it
ended: a connector whose ``read`` needs what ``list`` opened (a connection) keeps it open
past the listing and gives an optional ``close()``, which the driver calls once the run's
reads are done, whether it finished or not.
"""

from __future__ import annotations

import base64
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "LIST_PAGE",
    "PAGE_BYTES",
    "Connector",
    "ItemUnreadable",
    "ListingIncomplete",
    "RemoteItem",
    "Removed",
    "format_for",
    "run_listing",
    "run_pages",
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
        """Asked once ``list(checkpoint)`` finished: whether it enumerated every item (then
        what it did not list is gone) rather than only the changes since ``checkpoint``
        (then what it yielded :class:`Removed` is gone)."""
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
    base = name.rpartition("/")[2]
    dot = base.rfind(".")
    return _FORMATS.get(base[dot:].lower()) if dot > 0 else None


#: Listed entries a page carries for core to compare (the answer names those to read).
LIST_PAGE = 1000
#: Bytes of item content (before base64) after which a page goes (one big item makes a page
#: about its own size).
PAGE_BYTES = 4 * 1024 * 1024


class _Carry:
    """What the next page sends besides its listing: items read (with their bytes) and
    items that failed to read."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.failed: list[dict[str, str]] = []
        self.size = 0

    def page(self, **more: Any) -> dict[str, Any]:
        page = {"items": self.items, "failed": self.failed, **more}
        self.items, self.failed, self.size = [], [], 0
        return page


def run_pages(
    connector: Connector,
    checkpoint: str | None,
    *,
    list_page: int = LIST_PAGE,
    page_bytes: int = PAGE_BYTES,
) -> Generator[dict[str, Any], list[str], None]:
    """One listing of ``connector`` as a run's pages (docs/connectors.md, "Sync runs"), a
    generator handler (docs/worker-protocol.md, "Streaming partials"): it yields each page
    and is sent back what core answered — the external ids, among that page's ``listed``,
    whose bytes core wants (new, changed, no marker, or last ingest failed). Those are read
    and sent with the next page; an unchanged item's bytes are never read.

    Pages: ``listed`` (``{externalId, marker}``, at most ``list_page`` with ``removed``),
    ``removed``, ``items`` (read, with their bytes; a page goes once they reach
    ``page_bytes``), ``failed``; the last (``partial: false``) also ``complete``,
    ``fullListing`` (asked after the listing, so a delta source that had to start over
    says so), ``checkpoint`` and ``error``, and lists nothing.
    """
    try:
        yield from _pages(connector, checkpoint, list_page, page_bytes)
    finally:
        close = getattr(connector, "close", None)
        if close is not None:
            close()


def _pages(
    connector: Connector, checkpoint: str | None, list_page: int, page_bytes: int
) -> Generator[dict[str, Any], list[str], None]:
    """:func:`run_pages` without the connector's ``close``."""
    listing = connector.list(checkpoint)
    listed: list[dict[str, Any]] = []
    removed: list[str] = []
    entries: dict[str, tuple[RemoteItem, str]] = {}
    carry = _Carry()
    complete, error = True, None
    while True:
        try:
            entry = next(listing, None)
        except ListingIncomplete as exc:
            complete, error = False, str(exc)
            entry = None
        if entry is not None:
            if isinstance(entry, Removed):
                removed.append(entry.external_id)
            elif (fmt := entry.format or format_for(entry.name)) is not None:
                listed.append({"externalId": entry.external_id, "marker": entry.marker})
                entries[entry.external_id] = (entry, fmt)
            if len(listed) + len(removed) < list_page:
                continue
        if listed or removed:
            wanted = yield carry.page(listed=listed, removed=removed, partial=True)
            listed, removed = [], []
            for ext in wanted or ():
                if ext not in entries:
                    continue
                item, fmt = entries[ext]
                _read_into(connector, item, fmt, carry)
                if carry.size >= page_bytes:
                    yield carry.page(partial=True)
            entries.clear()
        if entry is None:
            break
    next_checkpoint = connector.next_checkpoint() if complete else None
    yield carry.page(
        partial=False, complete=complete, fullListing=connector.full_listing(checkpoint),
        checkpoint=next_checkpoint, error=error,
    )  # fmt: skip


def _read_into(connector: Connector, item: RemoteItem, fmt: str, carry: _Carry) -> None:
    """Read one item into the carry, or note it failed."""
    try:
        raw = connector.read(item)
    except (ItemUnreadable, OSError) as exc:
        carry.failed.append({"externalId": item.external_id, "reason": str(exc)})
        return
    carry.items.append({
        "externalId": item.external_id, "name": item.name, "format": fmt,
        "contentB64": base64.b64encode(raw).decode(), "marker": item.marker,
        "modifiedUs": item.modified_us, "size": len(raw), "acl": item.acl,
    })  # fmt: skip
    carry.size += len(raw)


def run_listing(
    connector: Connector, known: Mapping[str, str | None], checkpoint: str | None
) -> dict[str, Any]:
    """One listing of ``connector`` gathered into one report, without core: a dry run for
    tests and tools. :func:`run_pages` is driven with core's answer played locally (read
    an item unless ``known`` — external id → last marker — holds its marker); the report
    has ``complete``, ``fullListing``, ``seen`` (every external id listed, for a full
    listing; ``[]`` for a delta), ``removed``, ``items``, ``failed``, ``unchanged`` (a
    count), ``checkpoint`` and ``error``.

    :raises Exception: what the connector raises besides :class:`ListingIncomplete`.
    """
    pages = run_pages(connector, checkpoint)
    report: dict[str, Any] = {"seen": [], "removed": [], "items": [], "failed": []}
    unchanged = 0
    page = next(pages)
    while True:
        listed = page.pop("listed", [])
        report["seen"] += [e["externalId"] for e in listed]
        report["removed"] += page.pop("removed", [])
        report["items"] += page.pop("items")
        report["failed"] += page.pop("failed")
        if not page.pop("partial"):
            break
        wanted = [
            e["externalId"] for e in listed
            if e["marker"] is None or known.get(e["externalId"], "\0") != e["marker"]
        ]  # fmt: skip
        unchanged += len(listed) - len(wanted)
        page = pages.send(wanted)
    pages.close()
    report.update(page, unchanged=unchanged)
    if not report["fullListing"]:
        report["seen"] = []
    return report
