"""Sync runs (docs/connectors.md, "Sync runs"): the report a connector worker submits for a
``sync:<kind>`` job, and the rules core applies to it — what counts as added, changed or
unchanged, and which sources a run retires (the deletion safety rules, "Deletions").

Pure; no I/O. A report core cannot read is :class:`InvalidSubmission`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec

from telha.domain.connectors import CONNECTOR_KINDS, ConnectorItem
from telha.domain.submission import InvalidSubmission

__all__ = [
    "SYNC_FORMATS",
    "FailedItemIn",
    "RunCounts",
    "SyncItemIn",
    "SyncReport",
    "decode_report",
    "is_sync_kind",
    "plan_retire",
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


class SyncReport(_In):
    """What a run found. ``complete``: the listing (or delta read) finished; only then is
    anything retired. ``full_listing``: ``seen`` names every item the source holds now (a
    folder walk), so what is not in it is gone; a delta source sets it false and names its
    deletions in ``removed`` (Graph's ``@removed``). ``checkpoint``: the cursor or delta
    token the next run starts from (kept only from a complete run). ``error``: why the
    listing did not complete."""

    complete: bool
    full_listing: bool = True
    seen: list[str] = []
    removed: list[str] = []
    items: list[SyncItemIn] = []
    failed: list[FailedItemIn] = []
    unchanged: int = 0
    checkpoint: str | None = None
    error: str | None = None
    #: How the worker reads bytes, which ``WorkerConsumer`` adds to every submission
    #: (docs/worker-protocol.md); a report writes no version, so it is not used.
    projection: dict[str, Any] | None = None


def decode_report(raw: bytes) -> SyncReport:
    """A worker's report.

    :raises InvalidSubmission: not a report.
    """
    try:
        return msgspec.json.decode(raw, type=SyncReport)
    except msgspec.ValidationError as exc:
        raise InvalidSubmission(f"sync report: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InvalidSubmission(f"sync report is not JSON: {exc}") from None


@dataclass(frozen=True, slots=True)
class RunCounts:
    """A run's counts (docs/connectors.md, "Run history"); ``warning`` set when the prune
    guard held the retires back."""

    listed: int
    added: int
    changed: int
    unchanged: int
    retired: int
    failed: int
    complete: bool
    warning: str | None = None
    error: str | None = None


def plan_retire(
    live: list[ConnectorItem],
    report: SyncReport,
    prune_max_fraction: float,
    confirm_prune: bool,
) -> tuple[list[ConnectorItem], str | None]:
    """The items a run retires, and the warning when it retires none because of the guard.

    Only the connector's own live items (``live``: not retired) are candidates, so a source
    ingested by hand or by another connector is never one. Nothing is retired unless the
    listing is ``complete``; an item that ``failed`` is never retired. A full listing
    retires what it did not see; a delta, what it names ``removed``. More than
    ``prune_max_fraction`` of ``live`` at once retires nothing (and warns) unless
    ``confirm_prune``.
    """
    if not report.complete:
        return [], None
    failed = {f.external_id for f in report.failed}
    if report.full_listing:
        seen = set(report.seen) | failed | {i.external_id for i in report.items}
        gone = [i for i in live if i.external_id not in seen]
    else:
        removed = set(report.removed) - failed
        gone = [i for i in live if i.external_id in removed]
    limit = math.floor(prune_max_fraction * len(live))
    if gone and len(gone) > limit and not confirm_prune:
        return [], (
            f"prune guard: this run would retire {len(gone)} of {len(live)} sources (more"
            f" than {prune_max_fraction:g}); nothing retired — run again with"
            " --confirm-prune (confirmPrune) if they are really gone"
        )
    return gone, None
