"""``job_states``: no job is in a state the queue cannot produce (docs/architecture.md).

- its state is one of ``pending``, ``leased``, ``completed``, ``dead`` and ``cancelled``
  (terminal: a cancel revoked its lease, if it had one);
- ``leased`` holds a lease: an owner, a deadline, a generation of at least 1;
- any other state holds none, and no streaming checkpoint (completing, failing, releasing
  and reaping all clear both);
- ``dead`` says why (``failureReason``);
- ``completed`` has its ``completed`` event, and (but for an ``erase`` job, which writes no
  version) what it names exists: ``version=<tx>`` a
  finalized version of the job's source written by this job, ``deduplicated`` a finalized
  version of the source with the job's content hash;
- a finalized version written by a job belongs to a ``completed`` job (the version and the
  completion commit in one transaction).
"""

from __future__ import annotations

import re
from typing import get_args

import msgspec

from telha.check.context import CheckContext
from telha.domain.erasure import ERASE_KIND
from telha.domain.ids import id_str
from telha.domain.model import JobState
from telha.domain.records import decode_continuation
from telha.domain.scan import ScanEvent, ScanJob
from telha.domain.sync_runs import is_sync_kind

__all__ = ["JobStates"]

NAME = "job_states"
_VERSION = re.compile(r"version=(\d+)")
_STATES: frozenset[str] = frozenset(get_args(JobState))


def _subject(ctx: CheckContext, j: ScanJob) -> str:
    return f"job {id_str(j.job_id)} ({j.kind}, {ctx.where(j.scope)})"


def _row_problems(j: ScanJob) -> list[str]:
    """What is impossible about the job row alone."""
    problems = []
    if j.state not in _STATES:
        problems.append(f"unknown state {j.state!r}")
    if j.state == "leased":
        if j.lease_owner is None or j.lease_deadline is None or j.lease_generation < 1:
            problems.append(
                f"leased without a lease (owner {j.lease_owner!r}, deadline {j.lease_deadline},"
                f" generation {j.lease_generation})"
            )
    elif j.lease_owner is not None or j.lease_deadline is not None:
        problems.append(f"{j.state} but holds a lease (owner {j.lease_owner!r})")
    if j.continuation is not None:
        if j.state != "leased":
            problems.append(f"{j.state} but holds a streaming checkpoint")
        try:
            decode_continuation(j.continuation)
        except msgspec.DecodeError:
            problems.append("its streaming checkpoint does not decode")
    if j.state == "dead" and not j.failure_reason:
        problems.append("dead without a failure reason")
    if j.attempts < 0:
        problems.append(f"negative attempts ({j.attempts})")
    return problems


class JobStates:
    """The ``job_states`` check (see the module docstring)."""

    names: tuple[str, ...] = (NAME,)

    async def run(self, ctx: CheckContext) -> None:
        """A pass over the jobs, then one over the versions."""
        async for page in ctx.scan.jobs(ctx.page):
            for j in page:
                ctx.report.count(NAME)
                for problem in _row_problems(j):
                    ctx.report.add(NAME, _subject(ctx, j), problem)
            await self._completions(ctx, [j for j in page if j.state == "completed"])
        async for versions in ctx.scan.versions(ctx.page):
            written = [
                (v, v.job_id) for v in versions if v.job_id and v.canonical_text_hash is not None
            ]
            jobs = {j.job_id: j for j in await ctx.scan.jobs_at([jid for _, jid in written])}
            for v, jid in written:
                ctx.report.count(NAME)
                job = jobs.get(jid)
                if job is None or job.state != "completed":
                    subject = ctx.version_subject(v.scope, v.source_id, v.tx)
                    state = "does not exist" if job is None else f"is {job.state}"
                    ctx.report.add(NAME, subject, f"written by job {id_str(jid)}, which {state}")

    async def _completions(self, ctx: CheckContext, done: list[ScanJob]) -> None:
        """Each completed job's last ``completed`` event and what it names."""
        if not done:
            return
        last: dict[bytes, ScanEvent] = {}
        for e in await ctx.scan.job_events([j.job_id for j in done]):
            if e.transition == "completed":
                last[e.job_id] = e
        named: dict[bytes, int] = {}
        deduplicated: list[ScanJob] = []
        for j in done:
            if j.kind == ERASE_KIND or is_sync_kind(j.kind):
                # An erasure or a sync run writes no version: its completed event is its
                # result (a run's item jobs are its children, checked as jobs of their own).
                continue
            event = last.get(j.job_id)
            m = _VERSION.match(event.detail or "") if event else None
            if event is None:
                ctx.report.add(NAME, _subject(ctx, j), "completed without a completed event")
            elif m:
                named[j.job_id] = int(m.group(1))
            elif event.detail == "deduplicated":
                deduplicated.append(j)
            else:
                detail = f"its completed event names no version ({event.detail!r})"
                ctx.report.add(NAME, _subject(ctx, j), detail)
        await self._named(ctx, [j for j in done if j.job_id in named], named)
        await self._deduplicated(ctx, deduplicated)

    @staticmethod
    async def _named(ctx: CheckContext, done: list[ScanJob], named: dict[bytes, int]) -> None:
        keys = [(j.scope, j.source_id, named[j.job_id]) for j in done]
        versions = {(v.scope, v.source_id, v.tx): v for v in await ctx.scan.versions_at(keys)}
        for j in done:
            v = versions.get((j.scope, j.source_id, named[j.job_id]))
            if v is None or v.canonical_text_hash is None or v.job_id != j.job_id:
                what = "missing" if v is None else "not its finalized version"
                detail = f"completed without its version: version {named[j.job_id]} is {what}"
                ctx.report.add(NAME, _subject(ctx, j), detail)

    @staticmethod
    async def _deduplicated(ctx: CheckContext, done: list[ScanJob]) -> None:
        if not done:
            return
        finals = await ctx.scan.final_content_hashes(list({(j.scope, j.source_id) for j in done}))
        sources = {(s, src) for s, src, _ in finals}
        contents = {(s, src, h) for s, src, h in finals}
        for j in done:
            if j.content_hash is None:
                found = (j.scope, j.source_id) in sources
            else:
                found = (j.scope, j.source_id, j.content_hash) in contents
            if not found:
                detail = "completed as deduplicated, but no finalized version has its content"
                ctx.report.add(NAME, _subject(ctx, j), detail)
