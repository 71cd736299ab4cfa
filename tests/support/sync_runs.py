"""Connector sync runs driven through REST (docs/connectors.md, "Sync runs"): start one and
wait until it and its item jobs ended, and read its counts. Shared by the connector tests."""

from __future__ import annotations

from typing import Any

import anyio
import httpx

__all__ = ["COUNTS", "run_counts", "run_sync", "wait_run"]

#: A run's counts, in the order the tests compare them.
COUNTS = ("listed", "added", "changed", "unchanged", "retired", "failed")


async def wait_run(
    api: httpx.AsyncClient, cid: str, run_id: str, *, within_s: float = 60
) -> dict[str, Any]:
    """Poll ``GET /v1/connectors/{cid}/runs`` until run ``run_id`` is ``completed`` or
    ``dead`` and none of its item jobs is pending or leased; the run as listed.

    :raises AssertionError: not so within ``within_s`` seconds.
    """
    run: dict[str, Any] = {}
    with anyio.move_on_after(within_s):
        while True:
            runs = (await api.get(f"/v1/connectors/{cid}/runs")).json()["runs"]
            run = next(r for r in runs if r["runId"] == run_id)
            busy = {"pending", "leased"} & set(run["children"])
            if run["state"] in ("completed", "dead") and not busy:
                return dict(run)
            await anyio.sleep(0.05)
    raise AssertionError(f"run {run_id} unfinished after {within_s} s: {run}")


async def run_sync(
    api: httpx.AsyncClient, cid: str, *, within_s: float = 60, **body: Any
) -> dict[str, Any]:
    """Start a run of connector ``cid`` (``body``: e.g. ``confirmPrune=True``) and wait for
    it (:func:`wait_run`); the run as listed.

    :raises AssertionError: the start is not ``202``, or the run does not end in time.
    """
    started = await api.post(f"/v1/connectors/{cid}/runs", json=body)
    assert started.status_code == 202, started.text
    return await wait_run(api, cid, started.json()["runId"], within_s=within_s)


def run_counts(run: dict[str, Any]) -> tuple[int, ...]:
    """``(listed, added, changed, unchanged, retired, failed)`` of a listed run."""
    return tuple(run[k] for k in COUNTS)
