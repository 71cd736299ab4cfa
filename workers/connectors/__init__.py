"""``connectors``: the connector worker (docs/connectors.md). It leases ``sync:<kind>``
jobs over ``WorkerService`` like a format worker leases ``ingest:<format>`` jobs — inside
``telha serve`` (add ``connectors`` to ``[workers] in_process``) or as its own process
(``python -m workers_common.run connectors``) — lists the connector's source through the
kind's :class:`~connectors.sdk.Connector` and submits the run's report page by page
(:func:`connectors.sdk.run_pages`).

The job's inline content is the run's spec (JSON): ``kind``, ``settings``, ``checkpoint``
(the markers of the items core holds are not in it: core compares each page's listing).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import Any

from connectors.folder import FolderConnector
from connectors.sdk import Connector, run_pages
from workers_common import CorruptInput, Job

__all__ = ["FORMATS", "KINDS", "handle"]

#: Connector kinds this worker runs, by name: each makes a :class:`Connector` of settings.
KINDS: dict[str, Callable[[dict[str, Any]], Connector]] = {"folder": FolderConnector}

FORMATS = tuple(f"sync:{kind}" for kind in KINDS)


def handle(job: Job) -> Generator[dict[str, Any], list[str], None]:
    """Run one sync job: a generator of its pages (:func:`connectors.sdk.run_pages`).

    :raises CorruptInput: a spec this worker cannot read, or a kind it does not run.
    :raises TransientFailure: the source cannot be reached (the connector's own).
    """
    try:
        spec = json.loads(job.raw or b"")
        kind = spec["kind"]
        make = KINDS[kind]
        settings = spec["settings"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptInput(f"sync spec unreadable: {type(exc).__name__}: {exc}") from None
    return run_pages(make(settings), spec.get("checkpoint"))
