"""Sync runs (docs/connectors.md, "Sync runs"): the pages of the report a connector worker
submits for a ``sync:<kind>`` job, and the rules core applies to them — which listed items
are read (the rest are unchanged), the run's counts so far, and the prune guard (the
deletion safety rules, "Deletions").

Pure; no I/O. A report core cannot read is :class:`InvalidSubmission`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.connectors import CONNECTOR_KINDS
from telha.domain.submission import InvalidSubmission

__all__ = [
    "MAX_PAGE_ENTRIES",
    "SYNC_FORMATS",
    "FailedItemIn",
    "KnownItem",
    "ListedIn",
    "RunProgress",
    "SyncItemIn",
    "SyncPage",
    "decode_page",
    "is_sync_kind",
    "progress_of",
    "prune_warning",
    "wanted",
]

#: The job format of each connector kind's runs: ``sync:<kind>`` (what connector workers
#: lease).
SYNC_FORMATS = tuple(f"sync:{kind}" for kind in CONNECTOR_KINDS)


def is_sync_kind(kind: str) -> bool:
    """Whether a job kind is a sync run's (``sync:<kind>``)."""
    return kind.startswith("sync:")


class _In(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    pass


class SyncItemIn(_In):
    """A new or changed item, with its bytes (base64) and the format to ingest it as."""

    external_id: str
    name: str
    format: str
    content_b64: str
    marker: str | None = None
    modified_us: int | None = None
    size: int | None = None
    acl: list[str] | None = None


class FailedItemIn(_In):
    """An item listed but not read (unreadable, vanished mid-run): never retired for it."""

    external_id: str
    reason: str


class ListedIn(_In):
    """An item a page lists for core to compare: its external id and change marker."""

    external_id: str
    marker: str | None = None


class SyncPage(_In):
    """One page of a run's report (docs/connectors.md, "Sync runs"), a streamed submission
    (``seq`` 0, 1, …; ``partial`` until the last). ``listed``: items core compares with
    their last markers — its answer names those whose bytes it wants; ``removed``: items
    the source says are gone (a delta's ``@removed``); ``items``: the bytes core asked for
    (with the previous page's answer); ``failed``: items that could not be read. The last
    page (``partial: false``) lists nothing and says ``complete`` (the listing, or delta
    read, finished: only then is anything retired), ``full_listing`` (it named every item
    the source holds, so what it did not list is gone; else only ``removed`` are),
    ``checkpoint`` (the token the next run starts from, kept from a complete run) and
    ``error`` (why the listing did not complete)."""

    seq: int = 0
    partial: bool = True
    listed: list[ListedIn] = []
    removed: list[str] = []
    items: list[SyncItemIn] = []
    failed: list[FailedItemIn] = []
    complete: bool | None = None
    full_listing: bool = True
    checkpoint: str | None = None
    error: str | None = None
    #: How the worker reads bytes, which ``WorkerConsumer`` adds to every submission
    #: (docs/worker-protocol.md); a run writes no version, so it is not used.
    projection: dict[str, Any] | None = None


#: Entries (listed, removed, items, failed) one page may carry.
MAX_PAGE_ENTRIES = 10_000


def decode_page(raw: bytes) -> SyncPage:
    """A worker's page.

    :raises InvalidSubmission: not a page: unreadable, over :data:`MAX_PAGE_ENTRIES`
        entries, a last page without ``complete`` or with ``listed`` (nothing would answer
        them), or a partial one with ``complete``.
    """
    try:
        page = msgspec.json.decode(raw, type=SyncPage)
    except msgspec.ValidationError as exc:
        raise InvalidSubmission(f"sync page: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InvalidSubmission(f"sync page is not JSON: {exc}") from None
    entries = len(page.listed) + len(page.removed) + len(page.items) + len(page.failed)
    if entries > MAX_PAGE_ENTRIES:
        raise InvalidSubmission(f"sync page: {entries} entries, more than {MAX_PAGE_ENTRIES}")
    if page.partial and page.complete is not None:
        raise InvalidSubmission("sync page: only the last page (partial false) says complete")
    if not page.partial and (page.complete is None or page.listed):
        raise InvalidSubmission("sync page: the last page says complete and lists nothing")
    return page


@dataclass(frozen=True, slots=True)
class KnownItem:
    """What core holds of a listed item: its marker as last ingested (``None``: read it
    again — its last ingest ended ``dead`` or ``cancelled``), whether it is retired."""

    marker: str | None
    retired: bool


def wanted(listed: list[ListedIn], known: Mapping[str, KnownItem]) -> list[str]:
    """The listed items whose bytes a run reads, in listing order: new, retired, changed
    marker, no marker, or a last ingest that failed (each once). The others are
    unchanged."""
    out: dict[str, None] = {}
    for entry in listed:
        k = known.get(entry.external_id)
        if k is None or k.retired or entry.marker is None or k.marker != entry.marker:
            out[entry.external_id] = None
    return list(out)


class RunProgress(msgspec.Struct, rename="camel", kw_only=True):
    """A run's counts so far, kept as its job's ``stats`` while it runs (so
    ``GET /v1/connectors/{id}/runs`` shows them) and as its final counts: ``generation`` and
    ``next_seq`` fence the pages of one attempt, ``wanted`` answers a repeated last page."""

    listed: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    retired: int = 0
    failed: int = 0
    complete: bool | None = None
    warning: str | None = None
    error: str | None = None
    checkpoint: str | None = None
    failed_items: list[dict[str, str]] = []
    generation: int = 0
    next_seq: int = 0
    wanted: list[str] = []


def progress_of(stats: bytes | None, generation: int) -> RunProgress:
    """The progress of the attempt under ``generation`` (a fresh one for a new attempt)."""
    if stats is not None:
        try:
            found = msgspec.json.decode(stats, type=RunProgress)
        except msgspec.DecodeError:
            found = None
        if found is not None and found.generation == generation:
            return found
    return RunProgress(generation=generation)


def prune_warning(
    gone: int, live: int, prune_max_fraction: float, confirm_prune: bool
) -> str | None:
    """The prune guard: why a run that would retire ``gone`` of the connector's ``live``
    sources retires none of them (more than ⌊``prune_max_fraction`` × ``live``⌋, not
    confirmed), else ``None``.

    Which items are ``gone`` is decided by the marks a run leaves (the one place:
    :func:`telha.storage.connectors.sync_pages.gone_items`): only the connector's own live
    items; after a complete listing only (an incomplete one retires nothing); a full
    listing's unlisted items, a delta's removed ones; never an item that failed.
    """
    limit = math.floor(prune_max_fraction * live)
    if gone and gone > limit and not confirm_prune:
        return (
            f"prune guard: this run would retire {gone} of {live} sources (more"
            f" than {prune_max_fraction:g}); nothing retired — run again with"
            " --confirm-prune (confirmPrune) if they are really gone"
        )
    return None
