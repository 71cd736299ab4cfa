"""``connectors``: the connector worker (docs/connectors.md). It leases ``sync:<kind>``
jobs over ``WorkerService`` like a format worker leases ``ingest:<format>`` jobs — inside
``telha serve`` (add ``connectors`` to ``[workers] in_process``) or as its own process
(``python -m workers_common.run connectors``) — lists the connector's source through the
kind's :class:`~connectors.sdk.Connector` and submits the run's report page by page
(:func:`connectors.sdk.run_pages`).

The job's inline content is the run's spec (JSON): ``kind``, ``scope`` (``tenant/org``:
whose connector it is), ``settings``, ``checkpoint`` (the markers of the items core holds
are not in it: core compares each page's listing). A
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
from workers_common.secret_grants import grants_from_env

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

    :raises CorruptInput: a spec this worker cannot read, a kind it does not run, a path
        outside ``[connectors] allowed_roots`` (:func:`connectors.roots.check_run`), or
        settings naming a secret ``[connectors] secrets`` does not grant to the run's scope.
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
    _check_secret(kind, settings, spec.get("scope"))
    return run_pages(make(settings), spec.get("checkpoint"))


def _check_secret(kind: str, settings: Any, scope: Any) -> None:
    """Refuse a run whose settings name a secret (``passwordEnv``) that ``[connectors]
    secrets`` does not grant to the run's scope (docs/connectors.md, "The imap kind"):
    before anything connects, so the secret is sent nowhere. The reason names the variable,
    never its value.

    :raises CorruptInput: not granted, or the grants do not parse.
    """
    if not isinstance(settings, dict) or "passwordEnv" not in settings:
        return
    var = str(settings["passwordEnv"])
    try:
        grants = grants_from_env()
    except ValueError as exc:
        raise CorruptInput(f"{kind}: [connectors] secrets: {exc}") from None
    if not isinstance(scope, str) or scope not in grants.get(var, ()):
        raise CorruptInput(
            f"{kind}: settings.passwordEnv {var} is not granted to this connector's scope"
            f" {scope} ([connectors] secrets)"
        )
