"""Versions that supersede (docs/architecture.md, "Versions and node identity"): the current
graph of every source is exactly one version's, the latest.

"Current" is the visibility rule of :mod:`telha.storage.core.visible` at now; a source's
**current version** is its latest published version that is not erased (none when every
published version is erased). Rows written by no version — an erasure's and a supersede's
trimmed node versions, whose ``(source_id, tx_from)`` names no version — are exempt from
``current_versions``; their provenance is still checked.

- ``current_versions``: the current node and edge rows a version wrote all come from one
  version of their source, and that version is the source's current version (a crash in
  the middle of a supersede must leave the old graph or the new one, never both).
- ``current_provenance``: every span of a current node's provenance (``[start, end]`` into
  the version that wrote it, ``[start, end, tx]`` into version ``tx`` of the node's source —
  a trimmed node belongs to the source that still supports it) lies in the current version
  of the node's source, and that source is not retired.
- ``unpublished_versions``: a version is published exactly when it is finalized (the
  publish and the finalize are one transaction), not before its own tx, and retired only
  once published; an unpublished version that is no live stream (abandoned) has no open
  node or edge row. A live stream's rows are open while it streams, hidden by the rule, and
  its finalize closes them unseen when its source published a newer version meanwhile.
  A version's identity is whole: a fingerprint with its identity JSON, the fingerprint
  the BLAKE3 of that JSON, a reason only beside them and one of the known reasons; a version
  written after one with a fingerprint has one (versions from before fingerprints are the
  only ones without).
- ``retired_sources``: a retired source (its current version carries ``retired_tx``) has
  no current node or edge row.

Each is set-based SQL in the database (:class:`~telha.storage.core.scan.Scan`), streamed in
pages: the grouping of current rows per source, a pass over the current nodes, a pass over
the versions (the unpublished ones held in memory: streams are few), one over the retired
sources.
"""

from __future__ import annotations

from telha.check.context import CheckContext
from telha.check.orphans import open_stream
from telha.check.spans import spans_of
from telha.domain.dedup import REASONS
from telha.domain.ids import content_hash, id_str
from telha.domain.scan import ScanCurrentNode, ScanVersion

__all__ = ["VersionChecks"]

CURRENT = "current_versions"
PROVENANCE = "current_provenance"
UNPUBLISHED = "unpublished_versions"
RETIRED = "retired_sources"


def _source(ctx: CheckContext, scope: int, source_id: bytes | None) -> str:
    """``source <uuid> (tenant/org)``."""
    sid = id_str(source_id) if source_id and len(source_id) == 16 else repr(source_id)
    return f"source {sid} ({ctx.where(scope)})"


def _row_problem(v: ScanVersion) -> str:
    """What is impossible about the version row's publish and retire alone ("" if none)."""
    finalized = v.canonical_text_hash is not None
    published = v.published_tx is not None
    if finalized and not published:
        return "finalized (it has a canonical text hash) but never published"
    if published and not finalized:
        return f"published at {v.published_tx} without a canonical text hash"
    if v.published_tx is not None and v.published_tx < v.tx:
        return f"published at {v.published_tx}, before its own tx"
    if v.retired_tx is not None and (v.published_tx is None or v.retired_tx < v.published_tx):
        return f"retired at {v.retired_tx} but published at {v.published_tx}"
    return _identity_problem(v)


def _identity_problem(v: ScanVersion) -> str:
    """What is wrong with the version's identity ("" if none): a version with an identity
    has a fingerprint, and it is the BLAKE3 of the identity JSON (docs/architecture.md,
    "Dedup, identity and versions"). A version without either may still have a reason:
    ``content`` needs no identity, and a version read without one after a version with one
    is ``projection`` (:func:`telha.domain.dedup.version_reason`)."""
    if v.identity is None and v.fingerprint is None:
        return ""
    if v.identity is None or v.fingerprint is None:
        return "a fingerprint without its identity, or an identity without its fingerprint"
    if content_hash(v.identity.encode()) != v.fingerprint:
        return "its fingerprint is not the BLAKE3 of its identity"
    if v.reason is not None and v.reason not in REASONS:
        return f"reason {v.reason!r} is not one of {', '.join(REASONS)}"
    return ""


def _provenance_problem(n: ScanCurrentNode) -> str:
    """Why the current node's provenance is not in its source's current version ("" if
    it is, or if the stored JSON does not decode: ``spans_in_text`` reports that)."""
    spans = spans_of(n.provenance, n.tx_from)
    if not spans:
        return ""
    if n.source_id is None:
        return "has provenance but no source"
    for _, _, tx in spans:
        if n.current_tx is None:
            return f"provenance points at version {tx} of a source with no current version"
        if n.retired_tx is not None:
            return f"provenance points at version {tx} of a source retired at {n.retired_tx}"
        if tx != n.current_tx:
            return (
                f"provenance points at version {tx} of its source, whose current version"
                f" is {n.current_tx}"
            )
    return ""


class VersionChecks:
    """``current_versions``, ``current_provenance``, ``unpublished_versions`` and
    ``retired_sources`` (see the module docstring)."""

    names: tuple[str, ...] = (CURRENT, PROVENANCE, UNPUBLISHED, RETIRED)

    async def run(self, ctx: CheckContext) -> None:
        """The four passes, in the order of :attr:`names`.

        :raises telha.domain.errors.StorageError: the snapshot cannot be read.
        """
        await self._current(ctx)
        await self._provenance(ctx)
        await self._unpublished(ctx)
        await self._retired(ctx)

    @staticmethod
    async def _current(ctx: CheckContext) -> None:
        async for page in ctx.scan.current_versions(ctx.page):
            for s in page:
                ctx.report.count(CURRENT)
                subject = _source(ctx, s.scope, s.source_id)
                if s.versions > 1:
                    detail = (
                        f"rows of {s.versions} versions are current at once"
                        f" (txs {s.first_tx} … {s.last_tx})"
                    )
                    ctx.report.add(CURRENT, subject, detail)
                elif s.current_tx is None:
                    detail = f"rows of version {s.last_tx} are current; no version is current"
                    ctx.report.add(CURRENT, subject, detail)
                elif s.last_tx != s.current_tx:
                    detail = (
                        f"rows of version {s.last_tx} are current, not of its current version"
                        f" {s.current_tx}"
                    )
                    ctx.report.add(CURRENT, subject, detail)

    @staticmethod
    async def _provenance(ctx: CheckContext) -> None:
        async for page in ctx.scan.current_nodes(ctx.page):
            for n in page:
                ctx.report.count(PROVENANCE)
                problem = _provenance_problem(n)
                if problem:
                    subject = f"node {id_str(n.node_id)}@{n.tx_from} ({ctx.where(n.scope)})"
                    ctx.report.add(PROVENANCE, subject, problem)

    @staticmethod
    async def _unpublished(ctx: CheckContext) -> None:
        unpublished: list[ScanVersion] = []
        #: The source of the last version seen with a fingerprint (versions come in
        #: (scope, source, tx) order): every later version of it needs one too.
        fingerprinted: tuple[int, bytes] | None = None
        async for page in ctx.scan.versions(ctx.page):
            for v in page:
                ctx.report.count(UNPUBLISHED)
                problem = _row_problem(v)
                if v.fingerprint is not None:
                    fingerprinted = (v.scope, v.source_id)
                elif not problem and fingerprinted == (v.scope, v.source_id):
                    problem = "no fingerprint, though an earlier version of its source has one"
                if problem:
                    subject = ctx.version_subject(v.scope, v.source_id, v.tx)
                    ctx.report.add(UNPUBLISHED, subject, problem)
                if v.published_tx is None:
                    unpublished.append(v)
        for i in range(0, len(unpublished), ctx.page):
            batch = unpublished[i : i + ctx.page]
            jobs = {
                j.job_id: j
                for j in await ctx.scan.jobs_at([v.job_id for v in batch if v.job_id is not None])
            }
            abandoned = {
                (v.scope, v.source_id, v.tx)
                for v in batch
                if not open_stream(v, jobs.get(v.job_id) if v.job_id else None)
            }
            for r in await ctx.scan.open_rows_at(sorted(abandoned)):
                if r.nodes or r.edges:
                    subject = ctx.version_subject(r.scope, r.source_id, r.tx)
                    detail = (
                        f"unpublished and no live stream, yet {r.nodes} node and {r.edges} edge"
                        " rows it wrote are open"
                    )
                    ctx.report.add(UNPUBLISHED, subject, detail)

    @staticmethod
    async def _retired(ctx: CheckContext) -> None:
        async for page in ctx.scan.retired(ctx.page):
            for r in page:
                ctx.report.count(RETIRED)
                if r.nodes or r.edges:
                    detail = (
                        f"retired at {r.retired_tx} (version {r.tx}), yet {r.nodes} node and"
                        f" {r.edges} edge rows are current"
                    )
                    ctx.report.add(RETIRED, _source(ctx, r.scope, r.source_id), detail)
