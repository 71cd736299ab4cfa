"""Run every registered check over one snapshot of a store and print the summary.

:data:`CHECKS` is the registry: one family per module, run in this order. A new invariant (say
the ``erasure`` check: no erased digest's bytes remain) is one more module with a
class following :class:`~telha.check.context.CheckFamily`, appended here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from telha.check.chunks import ChunkHashes
from telha.check.context import CheckContext, CheckFamily
from telha.check.erasure import ErasureLeftovers
from telha.check.jobs import JobStates
from telha.check.orphans import OrphanVersions
from telha.check.search import SearchIndex
from telha.check.sources import SourceJobs
from telha.check.spans import SpanChecks
from telha.check.versions import VersionChecks
from telha.check.violations import Report
from telha.config import Config
from telha.storage import open_store
from telha.storage.protocol import ScanStore

__all__ = ["CHECKS", "check_config", "format_report", "run_checks"]

#: Every check family, in the order they run and appear in the summary.
CHECKS: list[CheckFamily] = [
    SpanChecks(),
    ChunkHashes(),
    OrphanVersions(),
    JobStates(),
    SourceJobs(),
    ErasureLeftovers(),
    VersionChecks(),
    SearchIndex(),
]


async def run_checks(
    store: ScanStore,
    *,
    page: int = 1000,
    families: Sequence[CheckFamily] | None = None,
    max_listed: int = 100,
) -> Report:
    """Run ``families`` (default :data:`CHECKS`) over one read-only snapshot of ``store``.

    :param page: rows per page when streaming a table (memory is bounded by pages and small
        caches, never by the database's size).
    :param max_listed: violations kept per check (all are counted).
    :raises telha.domain.errors.StorageError: the store cannot be read.
    """
    report = Report(max_listed=max_listed)
    families = CHECKS if families is None else families
    for family in families:
        for name in family.names:
            report.declare(name)
    async with store.scan() as scan:
        ctx = CheckContext(scan, report, page, await scan.scopes(), store)
        for family in families:
            await family.run(ctx)
    return report


async def check_config(cfg: Config, base_dir: Path, *, page: int = 1000) -> Report:
    """Open the store ``cfg`` names read-only (SQLite ``mode=ro``: safe beside a live
    ``telha serve``; PostgreSQL: read-only sessions) and :func:`run_checks` on it.

    :raises telha.domain.errors.StorageError: the store cannot be opened or read, or its schema is
        not current.
    """
    # Two connections: the snapshot holds one for the whole run; checks that read beside it
    # (``erasure``) take the other.
    async with open_store(cfg, base_dir, readers=2, pool_size=2, readonly=True) as store:
        return await run_checks(store, page=page)


def format_report(report: Report, location: str) -> str:
    """The summary table (check, items checked, violations), the listed violations, and a
    last line ``telha check: N violations`` (``OK`` when none)."""
    width = max([len("check"), *map(len, report.checked)])
    lines = [f"{'check':<{width}}  {'checked':>10}  {'violations':>10}"]
    for name, checked in report.checked.items():
        lines.append(f"{name:<{width}}  {checked:>10}  {report.violation_counts[name]:>10}")
    if report.violations:
        lines.append("")
        lines += [f"VIOLATION {v.line()}" for v in report.violations]
        unlisted = report.total - len(report.violations)
        if unlisted:
            lines.append(f"… and {unlisted} more (at most {report.max_listed} listed per check)")
    lines.append("")
    n = report.total
    verdict = "OK, no violations" if not n else f"{n} violation{'s' if n > 1 else ''}"
    lines.append(f"telha check: {verdict} ({location})")
    return "\n".join(lines)
