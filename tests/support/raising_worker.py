"""A worker module for the classification test (``code`` jobs, run in a pool process): by the
job's name its handler raises what a parser raises on bad bytes — ``LookupError`` for an
unknown charset label (``*lookup*``), ``RecursionError`` (``*recursion*``) — or, on its first
attempt only, a ``RuntimeError`` that is nobody's input (``*hiccup*``); anything else is an
empty document."""

from __future__ import annotations

from workers_common import Job

FORMATS = ("code",)
PROCESS_POOL = True


def _deep(n: int) -> int:
    return _deep(n + 1) + 1


def handle(job: Job) -> dict[str, object]:
    if "lookup" in job.name:
        job.content.decode("uft-8")
    if "recursion" in job.name:
        _deep(0)
    if "hiccup" in job.name and job.attempts == 0:
        raise RuntimeError("disk hiccup")
    return {"v": 1, "canonicalText": ""}
