"""What code outside :mod:`telha.storage` may name besides the Protocols
(:mod:`telha.storage.protocol`, which re-exports each aggregate's role) and
:func:`telha.storage.open_store`: the record types those Protocols take and return, and the
constants a caller of them needs.

They are defined beside the transaction functions that write them (each aggregate's package,
``telha/storage/<aggregate>/``, and ``telha/storage/core/``); this module is their one public
name, so those stay free to move (docs/architecture.md, "Layering").
"""

from __future__ import annotations

from telha.storage.connectors.sync_pages import PageApply
from telha.storage.connectors.sync_runs import RunRow
from telha.storage.core.scan import Scan
from telha.storage.jobs.cancel import REVOKED
from telha.storage.keys.queries import LAST_USED_EVERY_US, KeyAccess
from telha.storage.retention.passes import JobKey, RetentionResult
from telha.storage.search.queries import Filters, Located, SearchHit
from telha.storage.versions.reproject import ReprojectRow
from telha.storage.webhooks.subscriptions import DeliveryClaim, DeliveryResult

__all__ = [
    "LAST_USED_EVERY_US",
    "REVOKED",
    "DeliveryClaim",
    "DeliveryResult",
    "Filters",
    "JobKey",
    "KeyAccess",
    "Located",
    "PageApply",
    "ReprojectRow",
    "RetentionResult",
    "RunRow",
    "Scan",
    "SearchHit",
]
