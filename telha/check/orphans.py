"""``orphan_versions``: a streamed version without a canonical text hash is either the pinned
version of a stream still open (its job ``leased`` with a checkpoint naming that tx) or an
orphan, hidden from reads (docs/architecture.md, "Streaming": a half-written version is closed
and never shows as a version): reads never list a version without a hash, and every node and
edge version the orphan wrote is visible at no time (``tx_to = tx_from``), and no node version
it had closed stays closed by it (abandoning a stream reopens them).

The unfinished versions are held in memory (one entry each: abandoned streams are rare); the
node pass runs only when there are orphans.
"""

from __future__ import annotations

import msgspec

from telha.check.context import CheckContext
from telha.domain.ids import id_str
from telha.domain.records import decode_continuation
from telha.domain.scan import ScanJob, ScanVersion

__all__ = ["OrphanVersions", "open_stream"]

NAME = "orphan_versions"


def open_stream(v: ScanVersion, job: ScanJob | None) -> bool:
    """Whether ``v`` is the pinned version of ``job``'s live stream."""
    if job is None or job.state != "leased" or job.continuation is None:
        return False
    try:
        return decode_continuation(job.continuation).tx == v.tx
    except msgspec.DecodeError:  # job_states reports the bad checkpoint
        return False


class OrphanVersions:
    """The ``orphan_versions`` check (see the module docstring)."""

    names: tuple[str, ...] = (NAME,)

    async def run(self, ctx: CheckContext) -> None:
        """Versions pass, then edges and nodes of the orphans."""
        orphans: set[tuple[int, bytes, int]] = set()
        async for page in ctx.scan.versions(ctx.page):
            unfinished = [v for v in page if v.canonical_text_hash is None]
            if not unfinished:
                continue
            ids = list({v.job_id for v in unfinished if v.job_id is not None})
            jobs = {j.job_id: j for j in await ctx.scan.jobs_at(ids)}
            for v in unfinished:
                ctx.report.count(NAME)
                if v.job_id is None:
                    subject = ctx.version_subject(v.scope, v.source_id, v.tx)
                    ctx.report.add(NAME, subject, "unfinished and written by no job")
                if not open_stream(v, jobs.get(v.job_id) if v.job_id else None):
                    orphans.add((v.scope, v.source_id, v.tx))
        if orphans:
            await self._hidden(ctx, orphans)

    @staticmethod
    async def _hidden(ctx: CheckContext, orphans: set[tuple[int, bytes, int]]) -> None:
        by_tx = {(scope, tx): source for scope, source, tx in orphans}
        for e in await ctx.scan.edges_from_tx(list(by_tx)):
            if e.tx_to != e.tx_from:
                subject = ctx.version_subject(e.scope, by_tx[(e.scope, e.tx_from)], e.tx_from)
                ctx.report.add(NAME, subject, f"orphan's edge {id_str(e.edge_id)} is visible")
        async for page in ctx.scan.nodes(ctx.page):
            for n in page:
                if (n.scope, n.source_id, n.tx_from) in orphans and n.tx_to != n.tx_from:
                    subject = ctx.version_subject(n.scope, n.source_id, n.tx_from)
                    ctx.report.add(NAME, subject, f"orphan's node {id_str(n.node_id)} is visible")
                closer = (n.scope, n.tx_to) if n.tx_to is not None else None
                if closer in by_tx and n.tx_from != n.tx_to:
                    assert n.tx_to is not None
                    subject = ctx.version_subject(n.scope, by_tx[closer], n.tx_to)
                    detail = f"node {id_str(n.node_id)}@{n.tx_from} is still closed by the orphan"
                    ctx.report.add(NAME, subject, detail)
