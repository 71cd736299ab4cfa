"""``connectors``: the connector worker (docs/connectors.md). It leases ``sync:<kind>``
jobs over ``WorkerService`` like a format worker leases ``ingest:<format>`` jobs — inside
``telha serve`` (add ``connectors`` to ``[workers] in_process``) or as its own process
(``python -m workers_common.run connectors``) — lists the connector's source through the
kind's :class:`~connectors.sdk.Connector` and submits the run's report page by page
(:func:`connectors.sdk.run_pages`).

The job's inline content is the run's spec (JSON): ``kind``, ``settings``, ``checkpoint``
(the markers of the items core holds are not in it: core compares each page's listing). A
``slack`` job (an item a ``slack-export`` run ingests: the Slack shape) is projected here
too, by :mod:`connectors.slack_message`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import Any

from connectors import slack_message
from connectors.folder import FolderConnector
from connectors.imap import ImapConnector
from connectors.roots import check_run
from connectors.sdk import Connector, run_pages
from connectors.slack_export import SlackExportConnector
from workers_common import CorruptInput, Job

__all__ = ["FORMATS", "KINDS", "handle"]

#: Connector kinds this worker runs, by name: each makes a :class:`Connector` of settings.
KINDS: dict[str, Callable[[dict[str, Any]], Connector]] = {
    "folder": FolderConnector,
    "imap": ImapConnector,
    "slack-export": SlackExportConnector,
}

#: The run formats, then the connector formats this worker projects (``slack``: the Slack
#: shape, :mod:`connectors.slack_message`).
FORMATS = (*(f"sync:{kind}" for kind in KINDS), "slack")


def handle(job: Job) -> dict[str, Any] | Generator[dict[str, Any], list[str], None]:
    """Run one sync job: a generator of its pages (:func:`connectors.sdk.run_pages`); or
    project one ``slack`` item: its submission (:func:`connectors.slack_message.handle`).

    :raises CorruptInput: a spec this worker cannot read, a kind it does not run, or a
        path outside ``[connectors] allowed_roots`` (:func:`connectors.roots.check_run`).
    :raises TransientFailure: the source cannot be reached (the connector's own).
    """
    if job.format == "slack":
        return slack_message.handle(job)
    try:
        spec = json.loads(job.raw or b"")
        kind = spec["kind"]
        make = KINDS[kind]
        settings = spec["settings"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptInput(f"sync spec unreadable: {type(exc).__name__}: {exc}") from None
    if not isinstance(settings, dict):
        raise CorruptInput("sync spec unreadable: settings is not an object")
    check_run(kind, settings)
    return run_pages(make(settings), spec.get("checkpoint"))
