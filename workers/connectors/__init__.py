"""``connectors``: the connector worker (docs/connectors.md). It leases ``sync:<kind>``
jobs over ``WorkerService`` like a format worker leases ``ingest:<format>`` jobs — inside
``telha serve`` (add ``connectors`` to ``[workers] in_process``) or as its own process
(``python -m workers_common.run connectors``) — lists the connector's source through the
kind's :class:`~connectors.sdk.Connector` and submits the run's report.

The job's inline content is the run's spec (JSON): ``kind``, ``settings``, ``known``
({external id: marker} of the items core holds live), ``checkpoint``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from connectors.folder import FolderConnector
from connectors.imap import ImapConnector
from connectors.sdk import Connector, run_listing
from workers_common import CorruptInput, Job

__all__ = ["FORMATS", "KINDS", "handle"]

#: Connector kinds this worker runs, by name: each makes a :class:`Connector` of settings.
KINDS: dict[str, Callable[[dict[str, Any]], Connector]] = {
    "folder": FolderConnector,
    "imap": ImapConnector,
}

FORMATS = tuple(f"sync:{kind}" for kind in KINDS)


def handle(job: Job) -> dict[str, Any]:
    """Run one sync job: its report (:func:`connectors.sdk.run_listing`).

    :raises CorruptInput: a spec this worker cannot read, or a kind it does not run.
    :raises TransientFailure: the source cannot be reached (the connector's own).
    """
    try:
        spec = json.loads(job.raw or b"")
        kind = spec["kind"]
        make = KINDS[kind]
        settings, known = spec["settings"], spec.get("known") or {}
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptInput(f"sync spec unreadable: {type(exc).__name__}: {exc}") from None
    return run_listing(make(settings), known, spec.get("checkpoint"))
