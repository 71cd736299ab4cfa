"""``source_jobs``: the ``sources`` table (what ``GET /v1/sources`` lists) names jobs that
exist (docs/operations.md, "Retention").

- a source's last job (``lastJobId``), when it names one, is a job of that source: the job
  enqueued last, or — once retention removed that one — the newest job that remains;
- a source with no version row at all has a last job: retention removes the row of a
  source whose last job it removed and that has nothing left.
"""

from __future__ import annotations

from telha.check.context import CheckContext
from telha.domain.ids import id_str

__all__ = ["SourceJobs"]

NAME = "source_jobs"


class SourceJobs:
    """The ``source_jobs`` check (see the module docstring)."""

    names: tuple[str, ...] = (NAME,)

    async def run(self, ctx: CheckContext) -> None:
        """One pass over the ``sources`` rows."""
        async for page in ctx.scan.source_rows(ctx.page):
            for s in page:
                ctx.report.count(NAME)
                subject = f"source {id_str(s.source_id)} ({ctx.where(s.scope)})"
                if s.last_job_id is not None and not s.job_found:
                    detail = f"its last job {id_str(s.last_job_id)} is not a job of the source"
                    ctx.report.add(NAME, subject, detail)
                elif s.last_job_id is None and not s.has_version:
                    ctx.report.add(NAME, subject, f"{s.state}, with neither a job nor a version")
